"""A node kube-scheduler declined is passed over until the next snapshot:
hand-computed cases on a real Steerer and InflightState."""

import pytest

from harness.reviews import pod
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from tests.harness.scoreboards import MEASURED_AT, FixedBoard

# a is the quietest by far: a pod's worth of load does not make it second.
LOADS = {"a": 0.0, "b": 5e7, "c": 6e7}
LIGHT = "1000"  # bytes/s: too little to move any node's rank


def _first(board: FixedBoard, constrained: bool) -> str:
    spec = {"nodeSelector": {"zone": "z"}} if constrained else {}
    decision = board.steerer.decide(
        pod(annotations={EXPECTED_BANDWIDTH: LIGHT}, spec=spec), {}, dry_run=True
    )
    return decision.preferences[0].node


@pytest.fixture
def board() -> FixedBoard:
    labelled = {name: {"labels": {"zone": "z"}} for name in LOADS}
    return FixedBoard(LOADS, replica="r1", **labelled)


@pytest.mark.parametrize("constrained", [False, True], ids=["heap", "scan"])
def test_a_node_a_pod_was_bound_away_from_is_named_first_again_only_after_a_refresh(
    board, constrained
):
    steered = board.steerer.decide(pod(annotations={EXPECTED_BANDWIDTH: LIGHT}), {}, dry_run=False)
    assert steered.preferences[0].node == "a"
    assert _first(board, constrained) == "a"  # a light booking leaves a the best
    assert board.inflight.rebook(steered.booking_key, "b") == "moved"
    assert _first(board, constrained) == "b"
    assert board.refresh() is not None
    assert _first(board, constrained) == "a"


def test_a_pod_bound_where_it_was_booked_declines_nothing(board):
    steered = board.steerer.decide(pod(annotations={EXPECTED_BANDWIDTH: LIGHT}), {}, dry_run=False)
    assert board.inflight.rebook(steered.booking_key, "a") == "kept"
    assert _first(board, False) == "a"
    assert board.inflight.declined_total == 0


def test_declines_are_counted_once_per_node_and_snapshot(board):
    def bound_away(first: str, to: str) -> None:
        key = board.inflight.book_seen(first, 1000.0, MEASURED_AT, "r0")
        assert board.inflight.rebook(key, to) == "moved"

    bound_away("a", "c")
    bound_away("a", "c")  # a declined already
    bound_away("b", "c")
    assert board.inflight.declined_total == 2
    assert board.refresh() is not None
    bound_away("a", "c")  # a new snapshot: a may decline again
    assert board.inflight.declined_total == 3


def test_another_replicas_pod_bound_away_from_its_first_preference_declines_it(board):
    key = board.inflight.book_seen("a", 1000.0, MEASURED_AT, "r0")
    assert _first(board, False) == "a"
    assert board.inflight.rebook(key, "c") == "moved"
    assert _first(board, False) == "b"
    assert _first(board, True) == "b"
