"""The choice with peers, read off the heap grouped by zone, is the one a
full scan finds: every candidate's live score plus its pull, on random
clusters, conversations and bursts."""

import dataclasses
import random

import pytest

from harness.reviews import pod
from kubectl_nettraffic.inflight.replica_share import NodeBlocks, ReplicaShare
from kubectl_nettraffic.kube.nodes import ZONE_LABEL
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.kube.workloads import Workload, pod_workload
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.steering.peer_pull import PeerPull
from tests.harness.scoreboards import MEASURED_AT, FixedBoard

ZONES = ("zone-a", "zone-b", "zone-c")


def _admitted() -> dict:
    return pod(annotations={EXPECTED_BANDWIDTH: "2Mi"})


def _board(
    rng: random.Random, nodes: int, replica: str | None = None
) -> tuple[FixedBoard, Workload]:
    loads = {f"n{i:03d}": rng.uniform(1e6, 1e8) for i in range(nodes)}
    zoned = {
        name: {"labels": {ZONE_LABEL: rng.choice(ZONES)}}
        for name in loads
        if rng.random() > 0.1  # a few nodes without a zone
    }
    # Links unknown, alike, or of 1, 10 and 25 Gbit/s.
    speeds = rng.choice(
        (None, 1.25e8, {name: rng.choice((1.25e8, 1.25e9, 3.125e9)) for name in loads})
    )
    board = FixedBoard(loads, link_speed=speeds, replica=replica, **zoned)
    talker = pod_workload(_admitted())
    assert talker is not None
    names = sorted(loads)
    # The peers on the busier half: only their own pull can lift them past
    # the quieter nodes of their zone.
    busier = sorted(names, key=loads.__getitem__)[nodes // 2 :]
    peers = [Workload("default", "Deployment", f"peer-{i}") for i in range(rng.randint(1, 4))]
    places = {talker: {rng.choice(names): 1 for _ in range(rng.randint(1, 6))}}
    for peer in peers:  # at most 8 nodes hold a peer: every one is read
        places[peer] = {rng.choice(busier): rng.randint(1, 3) for _ in range(2)}
    pairs = {talker: tuple((peer, rng.uniform(1e6, 2e7)) for peer in peers)}
    conversations = Conversations(pairs, places, 0.0)
    outcome = board.measurer.measure()
    assert outcome.snapshot is not None
    learned = LearnedBandwidth({}, None, 0.0, conversations)
    board.scoreboard.record(
        dataclasses.replace(
            outcome, snapshot=dataclasses.replace(outcome.snapshot, learned=learned)
        )
    )
    return board, talker


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("replicas", [1, 2])
def test_the_pulled_choice_is_the_full_scan_s(seed, replicas):
    """Also on links of different speeds (a slower link loses what the pod
    fills of it beyond the fastest) and with a second replica steering (its
    nodes count one more pod while this one admits: the walk over the shared
    heap, exact within its MOST_READ nodes)."""
    rng = random.Random(seed)
    sizes = (20, 60, 200) if replicas == 1 else (20, 60)
    board, talker = _board(rng, rng.choice(sizes), None if replicas == 1 else "r0")
    share = None
    if replicas == 2:
        names = sorted(board.snapshot.nodes)
        board.inflight.book_seen(names[0], 0.0, MEASURED_AT, "r1")
        share = ReplicaShare(0, NodeBlocks(names, 2))
    # A strong pull (100 points for all of a pod's bytes on a node), so
    # that the busier half, where the peers run, can win.
    peers = dataclasses.replace(board.settings.peers, source="istio", pull_points=100.0)
    settings = dataclasses.replace(board.settings, peers=peers)
    board.steerer.settings = settings
    snapshot = board.snapshot
    learned = snapshot.learned
    assert learned is not None and learned.conversations is not None
    least = min(s.penalty_per_byte for s in snapshot.candidates)
    bandwidth = 2 * 2**20
    booked = False  # this replica has booked a pod: it is admitting
    for _ in range(15):  # a burst: each booking moves the next choice
        unseen = board.inflight.view()
        # The other replica's nodes: one pod more while this one admits.
        others = share.handicap(bandwidth if booked else 0.0) if share else lambda s: 0.0
        # The full scan, from a pull of its own with the same steered counts.
        shadow = PeerPull(learned.conversations, snapshot.nodes, settings.peers)
        if board.steerer._peers is not None:
            shadow.steered.update(board.steerer._peers.steered)
        plan = shadow.plan(talker)
        assert plan is not None
        pull = shadow.for_pod(talker, plan, bandwidth, unseen)
        ranked = sorted(
            (
                (
                    s.score_with(unseen.get(s.name, (0.0, 0))[0])
                    + pull.points(s)
                    - (s.penalty_per_byte - least) * bandwidth
                    - others(s),
                    -i,
                    s.name,
                )
                for i, s in enumerate(snapshot.candidates)
            ),
            reverse=True,
        )
        decision = board.steerer.decide(_admitted(), {}, dry_run=False)
        booked = booked or decision.booking_key != 0
        chosen = [p.node for p in decision.preferences]
        assert chosen == [name for _, _, name in ranked[: len(chosen)]]
        assert [p.score for p in decision.preferences] == pytest.approx(
            [effective for effective, _, _ in ranked[: len(chosen)]]
        )


def test_a_node_whose_peers_take_a_sliver_of_the_pod_s_bytes_gains_its_zone_s_pull_alone():
    # Two nodes in one zone, equally loaded. The peer has one pod on
    # "sliver" and 99 elsewhere in the zone: of the pod's bytes to it, 1%
    # stays on "sliver", 0.4 points at the default 40 pullPoints; on "most"
    # it keeps 99%.
    loads = {"sliver": 5e6, "plain": 5e6, "most": 5e6}
    board = FixedBoard(loads, **{name: {"labels": {ZONE_LABEL: "zone-a"}} for name in loads})
    talker = pod_workload(_admitted())
    assert talker is not None
    peer = Workload("default", "Deployment", "peer")
    places = {talker: {"plain": 1}, peer: {"sliver": 1, "most": 99}}
    conversations = Conversations({talker: ((peer, 2 * 2**20),)}, places, 0.0)
    settings = dataclasses.replace(board.settings.peers, source="istio")
    pull = PeerPull(conversations, board.snapshot.nodes, settings)
    plan = pull.plan(talker)
    assert plan is not None
    pod_pull = pull.for_pod(talker, plan, 2 * 2**20, {})
    scores = {score.name: score for score in board.snapshot.candidates}
    zone_only = pod_pull.points(scores["plain"])
    assert zone_only > 0
    assert pod_pull.points(scores["sliver"]) == zone_only
    assert pod_pull.points(scores["most"]) > zone_only + 10
    assert [node for node, _ in pod_pull.own_nodes()] == ["most"]
    # explain is told the zone pulled it there, not the peer.
    assert pod_pull.annotation(["sliver", "most"]).split(",") == [
        f"sliver={zone_only:.1f}:zone",
        f"most={pod_pull.points(scores['most']):.1f}:default/Deployment/peer",
    ]
