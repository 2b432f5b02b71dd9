"""The one choice is the one a full scan finds: every candidate's live
score plus its points (pull, links, replicas, unlearned pods,
constraints), on random clusters, conversations and bursts."""

import dataclasses
import math
import random

import pytest

from harness.reviews import pod
from kubectl_nettraffic.kube.nodes import ZONE_LABEL, zones_of
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.kube.workloads import Workload, pod_workload
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.ranking.handicaps import POINTS_PER_POD
from kubectl_nettraffic.ranking.replica_share import NodeBlocks, ReplicaShare
from kubectl_nettraffic.scoring.spread import Spread, SpreadRules
from kubectl_nettraffic.steering.peer_pull import PullPlans
from tests.harness.choices import scanned
from tests.harness.scoreboards import MEASURED_AT, FixedBoard

ZONES = ("zone-a", "zone-b", "zone-c")


def _admitted(annotated: bool = True, zone: str | None = None) -> dict:
    """The talker's pod: annotated (else booked at the default: unlearned),
    and with ``zone``, kept to it by a nodeSelector."""
    admitted = pod(annotations={EXPECTED_BANDWIDTH: "2Mi"} if annotated else {})
    if zone is not None:
        admitted["spec"]["nodeSelector"] = {ZONE_LABEL: zone}
    return admitted


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
    board.measure_with(conversations)
    return board, talker


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_the_choice_is_the_full_scan_s(seed, replicas):
    """Every term at once, on random clusters: the pull of peers, links of
    different speeds (a slower link loses what the pod fills of it beyond
    the fastest), other replicas steering (their nodes count one more pod
    while this one admits), a workload booked at the default (its pods in
    flight count against their nodes) and pods kept to a zone."""
    rng = random.Random(seed)
    board, talker = _board(rng, rng.choice((20, 60, 200)), None if replicas == 1 else "r0")
    names = sorted(board.snapshot.nodes)
    share = None
    if replicas > 1:
        for other in range(1, replicas):
            board.inflight.book_seen(names[other], 0.0, MEASURED_AT, f"r{other}")
        share = ReplicaShare(0, NodeBlocks(names, replicas))
    annotated = rng.random() < 0.5
    zone = rng.choice((None, None, *ZONES))
    # A strong pull (100 points for all of a pod's bytes on a node), so
    # that the busier half, where the peers run, can win.
    peers = dataclasses.replace(board.settings.peers, source="istio", pull_points=100.0)
    settings = dataclasses.replace(board.settings, peers=peers)
    board.steerer.settings = settings
    snapshot = board.snapshot
    learned = snapshot.learned
    assert learned is not None and learned.conversations is not None
    least = min(s.penalty_per_byte for s in snapshot.candidates)
    bandwidth = 2 * 2**20 if annotated else settings.steering.default_pod_bandwidth
    booked = False  # this replica has booked a pod: it is admitting
    for _ in range(15):  # a burst: each booking moves the next choice
        unseen = board.inflight.view()
        # The other replicas' nodes: one pod more while this one admits.
        others = share.handicap(bandwidth if booked else 0.0) if share else lambda s: 0.0
        # The full scan, from a pull of its own with the same pods in flight.
        shadow = PullPlans(learned.conversations, snapshot.nodes, settings.peers)
        plan = shadow.plan(talker)
        assert plan is not None
        with board.inflight.admission(snapshot) as admission:
            in_flight = dict(admission.in_flight(talker))
        pull = shadow.for_pod(plan, bandwidth, unseen, in_flight)
        unlearned = {} if annotated else in_flight
        # The workload's spread (kube-scheduler's defaults), over its pods
        # booked and those the learner placed (scoring/spread.py's rules,
        # checked by hand in tests/test_spread.py).
        zone_of = zones_of(snapshot.nodes.values())

        def per_zone(pods_on, zone_of=zone_of):
            counts = {}
            for node, pods in pods_on.items():
                if node in zone_of:
                    counts[zone_of[node]] = counts.get(zone_of[node], 0) + pods
            return counts

        spread = Spread(  # zones alone: a node the workload filled gets no term, not no rank
            # A pod of unknown size keeps its zones even (SpreadRules.balanced).
            SpreadRules(5 if annotated else 1, None),
            (in_flight, per_zone(in_flight)),
            zone_of,
            {zone_of[s.name] for s in snapshot.candidates if s.name in zone_of},
            # No binding has left its zone: one pod's room is kept, for the
            # pod being placed (and its pods booked, never shown bound here).
            skew_room=1,
        )

        def points(s, pull=pull, others=others, unlearned=unlearned, spread=spread):
            if zone is not None and snapshot.nodes[s.name].labels.get(ZONE_LABEL) != zone:
                return -math.inf
            if not spread.zone_allows(s.name):
                return -math.inf
            return (
                pull.points(s)
                - (s.penalty_per_byte - least) * bandwidth
                - others(s)
                - POINTS_PER_POD * unlearned.get(s.name, 0)
            )

        full = [entry for entry in scanned(snapshot, 3, points, unseen) if entry[0] > -math.inf]
        if not full:  # the spread left no node the pod fits: chosen without it
            unkept = Spread(SpreadRules(None, None), ({}, {}), {}, ())
            ranked = scanned(snapshot, 3, lambda s, unkept=unkept: points(s, spread=unkept), unseen)
            full = [entry for entry in ranked if entry[0] > -math.inf]
        decision = board.steerer.decide(_admitted(annotated, zone), {}, dry_run=False)
        booked = booked or decision.booking_key != 0
        assert [p.node for p in decision.preferences] == [name for _, name in full]
        assert [p.score for p in decision.preferences] == pytest.approx([e for e, _ in full])


@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_a_peer_ranked_300th_of_1500_is_preferred_with_any_replicas(replicas):
    """The pod's one peer runs on the node ranked 301st by score (80
    against the best 99): its pull lifts that node first, with one, two or
    three replicas steering (the chart's default is two)."""
    nodes = 1500
    loads = {f"n{i:04d}": 1e6 + i * 1e5 for i in range(nodes)}  # n0000 quietest
    board = FixedBoard(loads, replica=None if replicas == 1 else "r0", link_speed=1e9)
    talker = pod_workload(_admitted())
    assert talker is not None
    peer = Workload("default", "Deployment", "peer")
    target = f"n{300:04d}"
    conversations = Conversations(
        {talker: ((peer, 2 * 2**20),)}, {talker: {"n1499": 1}, peer: {target: 1}}, 0.0
    )
    board.measure_with(conversations)
    scores = {s.name: s.score for s in board.snapshot.candidates}
    assert sorted(scores, key=lambda n: -scores[n]).index(target) == 300
    for other in range(1, replicas):  # the other replicas seen steering
        board.inflight.book_seen(f"n{other:04d}", 0.0, MEASURED_AT, f"r{other}")
    peers = dataclasses.replace(board.settings.peers, source="istio")
    board.steerer.settings = dataclasses.replace(board.settings, peers=peers)
    decision = board.steerer.decide(_admitted(), {}, dry_run=False)
    assert decision.preferences[0].node == target


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
    pull = PullPlans(conversations, board.snapshot.nodes, settings)
    plan = pull.plan(talker)
    assert plan is not None
    pod_pull = pull.for_pod(plan, 2 * 2**20, {}, {})
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
