"""A burst of an unlearned workload spreads: hand-computed cases (the
counts themselves: tests/test_bookings.py)."""

from dataclasses import replace

import pytest

from harness.reviews import pod
from kubectl_nettraffic.inflight.state import OWN_HEAP_FROM
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.ranking.candidates import Group
from kubectl_nettraffic.ranking.handicaps import POINTS_PER_POD
from kubectl_nettraffic.ranking.node_points import NodePoints
from kubectl_nettraffic.scoring.node_scores import NodeScore
from tests.harness.scoreboards import MEASURED_AT, FixedBoard, adopted, fixed_board

WEB = Workload("default", "ReplicaSet", "web-7d9c4b")
API = Workload("default", "ReplicaSet", "api-5f6d")


def _node(name: str) -> NodeScore:
    return NodeScore(name, 0, 0, 0, None, None, None, None, 100.0, 0.0, True, True, None)


def test_each_pod_in_flight_counts_against_its_node_for_its_workload_only():
    groups = [Group("", 0.0, True)]
    assert NodePoints(groups, 0.0, 1.0, 0.0).uniform
    points = NodePoints(groups, 0.0, 1.0, 0.0, unlearned={"a": 2, "b": 1})
    assert not points.uniform
    assert [points.of(_node(n), 0) for n in "abc"] == [-2 * POINTS_PER_POD, -POINTS_PER_POD, 0.0]


# Scores: a 100, b 97.5, c 0; the default booking (1Mi) costs 0.26 points.
LOADS = {"a": 0.0, "b": 1e7, "c": 4e8}


def _first_nodes(board, pods):
    return [board.steerer.decide(p, {}, dry_run=False).preferences[0].node for p in pods]


def test_a_burst_booked_at_the_default_spreads_before_a_node_gets_a_second_pod():
    board = fixed_board(LOADS)
    web = [pod(generate_name="web-7d9c4b-") for _ in range(3)]
    # a takes the first; with it, a is 5.26 points down, below b
    assert _first_nodes(board, web) == ["a", "b", "a"]
    # another workload not learned yet is not held back by web's pods
    assert _first_nodes(board, [pod(generate_name="api-5f6d-")]) == ["a"]


def test_a_pod_whose_bandwidth_is_known_is_booked_by_it_alone():
    board = fixed_board(LOADS)
    annotated = [
        pod(generate_name="web-7d9c4b-", annotations={"nettraffic.io/expected-bandwidth": "1Mi"})
        for _ in range(3)
    ]
    assert _first_nodes(board, annotated) == ["a", "a", "a"]


def test_a_burst_follows_its_pods_to_the_nodes_they_were_bound_to():
    """The binding watch moves a booking: the pod's count moves with it, and
    a dropped booking counts nowhere (before, the count stayed where the
    pod was first booked)."""
    board = fixed_board(LOADS)
    inflight = board.inflight
    first = board.steerer.decide(pod(generate_name="web-7d9c4b-"), {}, dry_run=False)
    assert first.preferences[0].node == "a"
    assert inflight.rebook(first.booking_key, "c") == "moved"
    board.refresh()  # a declined the pod: named first again from the next measurement
    # a is free of web's pods again; c carries one (it was last anyway)
    second = board.steerer.decide(pod(generate_name="web-7d9c4b-"), {}, dry_run=False)
    assert [p.node for p in second.preferences] == ["a", "b", "c"]
    assert inflight.release(second.booking_key)
    third = board.steerer.decide(pod(generate_name="web-7d9c4b-"), {}, dry_run=False)
    assert third.preferences[0].node == "a"


def _spread_burst(replica, constrained):
    """60 pods of one workload not learned yet over 40 nodes, as one
    replica of two; ``constrained``: each pod with a nodeSelector every
    node matches, which takes the choice off the heaps to a scan."""
    loads = {f"n{i:02d}": i * 2e5 for i in range(40)}
    labelled = {name: {"labels": {"zone": "z"}} for name in loads}
    board = FixedBoard(loads, replica="r1" if replica else None, **labelled)
    if replica:
        board.inflight.book_seen("n39", 1.0, MEASURED_AT, "r0")
    spec = {"nodeSelector": {"zone": "z"}} if constrained else {}
    chosen = []
    for index in range(60):
        decision = board.steerer.decide(pod(spec=dict(spec)), {}, dry_run=False)
        chosen.append([(p.node, p.weight) for p in decision.preferences])
        if index % 7 == 3:  # some are bound to their second preference
            board.inflight.rebook(decision.booking_key, decision.preferences[1].node)
    return chosen


@pytest.mark.parametrize("replica", [False, True])
def test_the_heaps_choose_what_the_scan_chooses(replica):
    """Past OWN_HEAP_FROM nodes the burst has a heap of its own, and with
    another replica the heaps are split by the share: every choice is the
    one the node-by-node scan makes, weights included."""
    heaps, scanned = _spread_burst(replica, False), _spread_burst(replica, True)
    assert len({c[0][0] for c in heaps}) > OWN_HEAP_FROM  # the own heap was used
    assert heaps == scanned


class _AdmittingWhenRead(tuple):
    """A snapshot's candidates that let ``admit`` run the first time they
    are read: the adopt building its heaps beside the admissions."""

    def __new__(cls, scores, admit):
        made = super().__new__(cls, scores)
        made.admit = admit
        return made

    def __iter__(self):
        admit, self.admit = self.admit, None
        if admit is not None:
            admit()
        return super().__iter__()


def _adopted_during_a_burst(replica, constrained):
    """A burst of one workload not learned yet and pods of a known one, a
    new snapshot adopted in its midst with 12 pods admitted (and one of
    another replica's seen) while the adopt works out its view and heaps;
    then the rest."""
    loads = {f"n{i:02d}": i * 2e5 for i in range(40)}
    labelled = {name: {"labels": {"zone": "z"}} for name in loads}
    now = [MEASURED_AT]
    board = FixedBoard(loads, clock=lambda: now[0], replica="r1" if replica else None, **labelled)
    if replica:
        board.inflight.book_seen("n39", 1.0, MEASURED_AT, "r0")
    spec = {"nodeSelector": {"zone": "z"}} if constrained else {}
    chosen = []

    def admit(count):
        for index in range(count):
            # Every third pod's figure is known: it is chosen off the shared heap.
            known = {EXPECTED_BANDWIDTH: "30Mi"} if index % 3 == 0 else {}
            admitted = pod(spec=dict(spec), annotations=known)
            decision = board.steerer.decide(admitted, {}, dry_run=False)
            chosen.append([(p.node, p.weight) for p in decision.preferences])

    admit(30)
    now[0] = MEASURED_AT + 21  # past the next measurement: its edge moves past every booking
    snapshot = board.snapshot
    meanwhile = _AdmittingWhenRead(snapshot.candidates, lambda: admit(12))
    board.inflight.adopt(replace(snapshot, generated_at=MEASURED_AT + 20, candidates=meanwhile))
    assert meanwhile.admit is None and adopted(board.inflight).candidates is meanwhile
    if replica:
        board.inflight.book_seen("n38", 1.0, now[0], "r0")
    admit(30)
    return chosen


@pytest.mark.parametrize("replica", [False, True])
def test_a_snapshot_adopted_while_a_burst_books_leaves_the_heaps_as_the_scan_sees_it(replica):
    """The pods admitted while the adopt built its heaps count in them:
    every choice after is the one the node-by-node scan makes."""
    heaps, scanned = _adopted_during_a_burst(replica, False), _adopted_during_a_burst(replica, True)
    assert heaps == scanned
