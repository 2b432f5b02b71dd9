"""bench.peers' optimum (bench/peer_optimum.py) against every placement of
a small service graph, tried one by one: for each routing the solver's
placement meets the rules and no placement that meets them sends fewer
bytes across zones (across nodes under PreferSameNode)."""

import itertools
from collections.abc import Iterator

import numpy as np
import pytest

from bench.peer_cluster import ROUTINGS, SAME_NODE, Cluster, Graph
from bench.peer_optimum import HOT, fan_in_cap, held_nodes_bound, nested_placement, solve

LINK = 1.25e9
ZONE = np.arange(6) % 3
GRAPH = Graph(
    names=["front", "service", "store"],
    replicas=[5, 3, 1],
    pairs={(0, 1): 30e6, (1, 2): 50e6, (0, 2): 5e6},
    external=[8e6, 0.0, 0.0],
)
SLOTS = np.array([3, 1, 2, 2, 1, 3])
# Node 4's link is nearly full: only a light pod fits under HOT.
BACKGROUND = np.array([0.1, 0.2, 0.1, 0.3, HOT - 0.012, 0.1]) * LINK


def _halves() -> np.ndarray:
    """Each pod's bytes each way, as if none stayed on its node."""
    return np.array(
        [
            (
                GRAPH.external[w]
                + sum(r for p, r in GRAPH.pairs.items() if w in p) / GRAPH.replicas[w]
            )
            / 2
            for w in range(3)
        ]
    )


def _counts_of(
    replicas: int, zone_max_skew: int | None, hostname_max_skew: int | None
) -> Iterator[tuple[int, ...]]:
    cap = fan_in_cap(replicas)
    if hostname_max_skew is not None:
        cap = min(cap, hostname_max_skew)
    for counts in itertools.product(range(cap + 1), repeat=len(ZONE)):
        per_zone = np.bincount(ZONE, weights=counts, minlength=3)
        if sum(counts) != replicas:
            continue
        if replicas >= 3 and (per_zone == 0).any():
            continue
        if zone_max_skew is not None and per_zone.max() - per_zone.min() > zone_max_skew:
            continue
        yield counts


def _measure(counts: np.ndarray, routing: str) -> float:
    cluster = Cluster(GRAPH, BACKGROUND, ZONE, counts.astype(float), routing=routing)
    inter, cross = cluster.pair_cut()
    return inter if routing == SAME_NODE else cross


def _meets_rules(counts: np.ndarray) -> bool:
    room = HOT * LINK - BACKGROUND
    return bool((counts.sum(axis=0) <= SLOTS).all() and (_halves() @ counts <= room + 1e-6).all())


def _best_by_trying(
    routing: str, zone_max_skew: int | None, hostname_max_skew: int | None
) -> float:
    best = np.inf
    choices = [list(_counts_of(r, zone_max_skew, hostname_max_skew)) for r in GRAPH.replicas]
    for placement in itertools.product(*choices):
        counts = np.array(placement)
        if _meets_rules(counts):
            best = min(best, _measure(counts, routing))
    return best


# (zone maxSkew, hostname maxSkew): none; a zone constraint; a hostname
# one that holds the front end (5 pods, fan-in cap 2) to one pod a node.
SPREADS = [(None, None), (1, None), (None, 1)]


@pytest.mark.parametrize(("zone_max_skew", "hostname_max_skew"), SPREADS)
@pytest.mark.parametrize("routing", ROUTINGS)
def test_the_optimum_is_the_best_placement_under_the_rules(
    routing: str, zone_max_skew: int | None, hostname_max_skew: int | None
) -> None:
    optimum = solve(GRAPH, BACKGROUND, ZONE, SLOTS, routing, 30, zone_max_skew, hostname_max_skew)
    assert optimum.optimal
    assert _meets_rules(optimum.counts)
    assert (optimum.counts.sum(axis=1) == GRAPH.replicas).all()
    for w, replicas in enumerate(GRAPH.replicas):
        assert optimum.counts[w].max() <= min(fan_in_cap(replicas), hostname_max_skew or replicas)
    best = _best_by_trying(routing, zone_max_skew, hostname_max_skew)
    assert optimum.objective == pytest.approx(best, rel=1e-6, abs=1.0)
    assert optimum.objective == pytest.approx(_measure(optimum.counts, routing))
    assert optimum.bound <= optimum.objective * (1 + 1e-4) + 1.0


def test_no_placement_meets_the_rules_is_said() -> None:
    with pytest.raises(RuntimeError, match="no placement meets the rules"):
        solve(GRAPH, BACKGROUND, ZONE, np.zeros(6, dtype=int), "spread", seconds=10)


@pytest.mark.parametrize("hostname_max_skew", [None, 1])
def test_the_held_nodes_bound_is_below_every_placement_under_prefer_same_node(
    hostname_max_skew: int | None,
) -> None:
    bound = held_nodes_bound(GRAPH, BACKGROUND, ZONE, SLOTS, hostname_max_skew)
    best = _best_by_trying(SAME_NODE, None, hostname_max_skew)
    assert 0 < bound <= best * (1 + 1e-6)


@pytest.mark.parametrize(("hostname_max_skew", "unserved"), [(None, 3), (1, 4)])
def test_a_one_pod_server_serves_at_most_a_node_full_of_its_callers(
    hostname_max_skew: int | None, unserved: int
) -> None:
    # 5 callers of a one-pod store: its node holds at most 2 of them (the
    # fan-in cap), or 1 under a hostname maxSkew of 1.
    graph = Graph(names=["front", "store"], replicas=[5, 1], pairs={(0, 1): 10e6}, external=[0, 0])
    bound = held_nodes_bound(graph, BACKGROUND, ZONE, SLOTS, hostname_max_skew)
    assert bound == pytest.approx(10e6 * unserved / 5)


@pytest.mark.parametrize("hostname_max_skew", [None, 3, 1])
def test_where_no_node_fills_the_nested_placement_sends_what_the_bound_says(
    hostname_max_skew: int | None,
) -> None:
    # Roomy nodes, four a zone: slots and links are no limit, so the bound
    # is reached. The servers must hold as many nodes as their callers do,
    # not as few as their pods fit on (else a zone is left out: None).
    zone = np.arange(12) % 3
    graph = Graph(
        names=["front", "service", "store", "cache"],
        replicas=[8, 4, 2, 6],
        pairs={(0, 1): 30e6, (0, 2): 10e6, (1, 2): 20e6, (0, 3): 5e6, (3, 2): 8e6},
        external=[0.0] * 4,
    )
    roomy, quiet = np.full(12, 40), np.full(12, 0.1 * LINK)
    counts = nested_placement(graph, quiet, zone, roomy, 5, hostname_max_skew)
    assert counts is not None
    assert counts.sum(axis=1).tolist() == graph.replicas
    for w, replicas in enumerate(graph.replicas):
        cap = fan_in_cap(replicas)
        assert counts[w].max() <= (
            cap if hostname_max_skew is None else min(cap, hostname_max_skew)
        )
        if replicas >= 3:
            assert (np.bincount(zone, weights=counts[w], minlength=3) > 0).all()
    bound = held_nodes_bound(graph, quiet, zone, roomy, hostname_max_skew)
    cluster = Cluster(graph, quiet, zone, counts.astype(float), routing=SAME_NODE)
    assert cluster.pair_cut()[0] == pytest.approx(bound)
