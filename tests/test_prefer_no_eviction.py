"""steering.preferNoEvictionBelow: the webhook marks a pod with the
descheduler's prefer-no-eviction annotation when its own figure (annotated
or learned) is below that share of the slowest eligible link, and only then."""

import jsonpatch
import pytest

from harness.reviews import pod
from kubectl_nettraffic.kube.pods import PREFER_NO_EVICTION
from kubectl_nettraffic.steering.pod_bandwidth import light_for_every_link
from tests.harness.scoreboards import FixedBoard

LINK = 1.25e9  # bytes/s: 10 Gbit/s
LOADS = {"a": 1e8, "b": 2e8, "c": 3e8}


def _annotations(share: float, admitted: dict) -> dict:
    board = FixedBoard(LOADS, link_speed=LINK, steering={"preferNoEvictionBelow": share})
    decision = board.steerer.decide(admitted, {}, dry_run=False)
    assert decision.preferences  # steered
    return jsonpatch.apply_patch(admitted, decision.patch)["metadata"].get("annotations", {})


def _with_bandwidth(figure: str) -> dict:
    return pod(annotations={"nettraffic.io/expected-bandwidth": figure})


@pytest.mark.parametrize(
    ("share", "admitted", "marked"),
    [
        (0.05, _with_bandwidth("10M"), True),  # 0.8% of the link
        (0.05, _with_bandwidth("62M"), True),  # 4.96%: just under 5%
        (0.05, _with_bandwidth("63M"), False),  # 5.04%
        (0.05, pod(), False),  # booked at the default: its own rate is not known
        (0.0, _with_bandwidth("10M"), False),  # off
    ],
)
def test_only_pods_known_to_be_light_are_marked(share, admitted, marked):
    annotations = _annotations(share, admitted)
    assert (PREFER_NO_EVICTION in annotations) is marked
    if marked:
        assert annotations[PREFER_NO_EVICTION] == "true"


def test_the_rule_reads_the_figure_s_source_and_the_slowest_link():
    assert light_for_every_link(1e6, "workload", LINK, 0.05)
    assert not light_for_every_link(1e6, "cluster", LINK, 0.05)  # a cluster-wide guess
    assert not light_for_every_link(1e6, "annotation", 0.0, 0.05)  # no link speed known
