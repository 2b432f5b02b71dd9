"""The peers simulation's model of a Service's trafficDistribution
(bench/peer_simulation.py, Cluster): where a client's bytes go under
PreferSameNode and PreferSameZone, by hand and against a recount."""

import argparse
from collections.abc import Sequence

import numpy as np
import pytest

from bench.peer_cluster import SAME_NODE, SAME_ZONE, SPREAD, Cluster, Graph
from bench.peer_optimum import Optimum
from bench.peer_simulation import Outcome
from bench.peers import Draws, draw_verdicts, missed_goals, variant


def _cluster(counts: Sequence[Sequence[float]], routing: str, rate: float = 6.0) -> Cluster:
    """Two workloads, client 0 calling server 1 (two replicas each), on
    nodes whose zone is their index mod 3."""
    matrix = np.array(counts)
    nodes = matrix.shape[1]
    graph = Graph(["client", "server"], [2, 2], {(0, 1): rate}, [0.0, 0.0])
    return Cluster(graph, np.zeros(nodes), np.arange(nodes) % 3, matrix, routing=routing)


def test_prefer_same_node_keeps_a_client_beside_a_server_off_the_link() -> None:
    # Nodes 0..3, zones 0, 1, 2, 0. Clients on 0 and 1; servers on 1 and 3.
    cluster = _cluster([[1, 1, 0, 0], [0, 1, 0, 1]], SAME_NODE)
    # The client on node 1 calls the server there; the one on node 0 has
    # none on its node but one in its zone (node 3): 3 bytes/s between nodes,
    # none across zones.
    assert cluster.pair_cut() == (3.0, 0.0)
    # Each way: node 0 sends 3, node 3 receives them, halved for each way.
    np.testing.assert_allclose(cluster.link_load(), [1.5, 0.0, 0.0, 1.5])


def test_prefer_same_zone_spreads_over_the_zone_and_falls_back_to_every_endpoint() -> None:
    # Clients on 0 (zone 0) and 2 (zone 2); servers on 0 and 3 (both zone 0).
    cluster = _cluster([[1, 0, 1, 0], [1, 0, 0, 1]], SAME_ZONE)
    # Node 0's client keeps half of its 3 bytes/s; node 2's zone has no
    # server, so it spreads over both, all across zones.
    assert cluster.pair_cut() == (1.5 + 3.0, 3.0)


def test_without_hints_every_client_spreads_over_every_server() -> None:
    # Clients on 0 and 1 (zones 0, 1); servers on 1 and 3 (zones 1, 0).
    counts = [[1, 1, 0, 0], [0, 1, 0, 1]]
    # Each client sends half its 3 bytes/s to each server: node 1's client
    # keeps half; each client crosses zones for half.
    assert _cluster(counts, SPREAD).pair_cut() == (3.0 + 1.5, 1.5 + 1.5)
    # The same pods under PreferSameNode: 3 between nodes, none across zones.
    assert _cluster(counts, SAME_NODE).pair_cut() == (3.0, 0.0)


@pytest.mark.parametrize("routing", [SAME_NODE, SAME_ZONE])
def test_the_links_carry_the_bytes_between_nodes_once(routing: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(100):
        nodes, workloads = int(rng.integers(3, 10)), int(rng.integers(2, 5))
        replicas = [int(rng.integers(1, 5)) for _ in range(workloads)]
        pairs = {
            (a, b): float(rng.uniform(1, 10))
            for a in range(workloads)
            for b in range(a + 1, workloads)
            if rng.random() < 0.7
        }
        counts = np.zeros((workloads, nodes))
        for w in range(workloads):
            for _ in range(replicas[w] - int(rng.integers(0, 2))):  # one may be replaced
                counts[w, int(rng.integers(nodes))] += 1
        graph = Graph([f"w{i}" for i in range(workloads)], replicas, pairs, [0.0] * workloads)
        cluster = Cluster(graph, np.zeros(nodes), np.arange(nodes) % 3, counts, routing=routing)
        inter, _ = cluster.pair_cut()
        # Every byte that leaves a node arrives at another: each way, the
        # links carry the bytes between nodes once.
        assert cluster.link_load().sum() == pytest.approx(inter)


def test_a_draw_where_the_default_sends_nothing_across_zones_is_judged_not_divided_by_zero() -> (
    None
):
    def draws(ours_cross: float) -> Draws:
        default = Outcome(inter_node=100.0, cross_zone=0.0, busiest=0.5, placed=10)
        ours = Outcome(inter_node=40.0, cross_zone=ours_cross, busiest=0.5, placed=10)
        runs = {"default": [default], "peers": [ours], "nettraffic": [default]}
        runs["other-ties"] = [default]
        return Draws(runs, [Optimum(np.zeros((2, 3)), 0.0, 0.0, True)], SAME_ZONE)

    met = draw_verdicts(draws(0.0))[0]
    # kube-scheduler with other ties sends none either: no noise.
    assert met["met"] is True and met["noise"] == 0.0
    assert missed_goals(met) == []
    verdict = draw_verdicts(draws(1.0))[0]
    assert verdict["cross_c"] == float("inf") and verdict["met"] is False
    assert missed_goals(verdict) == ["(c) above kube-scheduler's cross-zone bytes"]


def test_each_variant_of_the_model_is_published_in_a_section_of_its_own() -> None:
    def section(**chosen: object) -> tuple[str, str]:
        options = {
            "traffic_distribution": SPREAD,
            "zone_constraint": False,
            "hostname_spread_only": False,
            "pull_points": None,
            **chosen,
        }
        name, _title, notes = variant(argparse.Namespace(**options))
        return name, notes

    assert section()[0] == "peers"
    routed, notes = section(traffic_distribution=SAME_NODE, pull_points=40.0)
    assert routed == "peers-PreferSameNode-pull-40"
    assert "trafficDistribution: PreferSameNode" in notes and "`peers.pullPoints` 40" in notes
    names = {
        section(zone_constraint=True)[0],
        section(hostname_spread_only=True)[0],
        section(traffic_distribution=SAME_ZONE)[0],
        "peers",
    }
    assert len(names) == 4
