"""A pod's walk through Steerer.decide stays short: the modules steerer.py
calls into, in order, one stay per run of calls into one module, at most
14 on every path (a known pod, an unlearned one, one with peers, one
admitted beside other replicas). A path that goes back and forth between
the same modules is one nobody can follow; the count makes it visible."""

import dataclasses
import sys
from collections.abc import Callable

import pytest

from harness.reviews import pod
from kubectl_nettraffic.kube.nodes import ZONE_LABEL
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.kube.workloads import Workload, pod_workload
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.steering.steerer import Decision
from tests.harness.scoreboards import MEASURED_AT, FixedBoard

STEERER = "kubectl_nettraffic.steering.steerer"
MOST_STAYS = 14


def walk(decide: Callable[[], Decision]) -> tuple[list[str], Decision]:
    """The modules of ours steerer.py's frames call into while ``decide``
    runs, consecutive calls into one module counted once."""
    stays: list[str] = []

    def profile(frame, event, _arg):  # type: ignore[no-untyped-def]
        if event != "call" or frame.f_back is None:
            return
        if frame.f_back.f_globals.get("__name__") != STEERER:
            return
        module = frame.f_globals.get("__name__", "")
        ours = module.startswith("kubectl_nettraffic.") and module != STEERER
        if ours and (not stays or stays[-1] != module):
            stays.append(module)

    sys.setprofile(profile)
    try:
        decision = decide()
    finally:
        sys.setprofile(None)
    return stays, decision


def _board(peers: bool, replica: str | None = None) -> FixedBoard:
    loads = {f"n{i}": 1e6 * i for i in range(1, 13)}
    zones = {name: {"labels": {ZONE_LABEL: f"zone-{i % 3}"}} for i, name in enumerate(loads)}
    board = FixedBoard(loads, replica=replica, **zones)
    if peers:
        talker = pod_workload(pod())
        assert talker is not None
        peer = Workload("default", "Deployment", "db")
        conversations = Conversations(
            {talker: ((peer, 5e6),), peer: ((talker, 5e6),)},
            {talker: {"n2": 1}, peer: {"n9": 2}},
            0.0,
        )
        board.measure_with(conversations)
        settings = board.settings
        board.steerer.settings = dataclasses.replace(
            settings, peers=dataclasses.replace(settings.peers, source="istio")
        )
    if replica is not None:  # another replica steers beside this one
        board.inflight.book_seen("n1", 1e6, MEASURED_AT, "other")
    return board


@pytest.mark.parametrize(
    "peers, annotated, replica",
    [
        (False, True, None),
        (False, False, None),
        (True, True, None),
        (True, False, None),
        (True, True, "r0"),
    ],
)
def test_a_pod_s_walk_through_decide_is_at_most_14_stays(peers, annotated, replica):
    board = _board(peers, replica)

    def admit() -> Decision:
        admitted = pod(annotations={EXPECTED_BANDWIDTH: "20Mi"} if annotated else {})
        return board.steerer.decide(admitted, {}, dry_run=False)

    admit()  # the first admission by a snapshot works out what the next reuse
    stays, decision = walk(admit)
    # The whole path: a choice, a patch and a booking.
    assert decision.patch is not None and decision.preferences and decision.booking_key
    assert ("kubectl_nettraffic.steering.peer_pull" in stays) == peers, stays
    assert len(stays) <= MOST_STAYS, " > ".join(stays)
