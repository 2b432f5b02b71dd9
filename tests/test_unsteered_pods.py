"""The pods no replica steered count in their workload's spread: the
UnsteeredPods watch against the fake API server over HTTP, placing pods in
a real Steerer's in-flight state."""

import jsonpatch
import pytest

from harness.reviews import pod
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH, STEERED_BY
from kubectl_nettraffic.kube.unsteered_pods import UnsteeredPods
from tests.conftest import wait_for
from tests.harness.scoreboards import MEASURED_AT, first_choice, zoned_board

PODS = ("api/v1", "default", "pods")


def _running(name, node, **kwargs):
    """A pod of harness.reviews' workload, bound to ``node``, no replica's label."""
    unsteered = pod(name=name, generate_name="web-7d9c4b-", **kwargs)
    unsteered["spec"]["nodeName"] = node
    unsteered["status"] = {"phase": "Running"}
    return unsteered


@pytest.fixture
def board():
    return zoned_board("replica1")


def _watch(fake_api, kubeconfig, board):
    watch = UnsteeredPods(api_client(kubeconfig), board.inflight)
    watch.start()
    assert watch.synced.wait(10)
    return watch


def test_pods_that_ran_before_the_install_count_in_their_workload_s_spread(
    fake_api, kubeconfig, board
):
    """Listed at the start, then watched: a pod counts once bound, until it
    is terminating, finished or deleted (kube-scheduler's spread counts it so)."""
    fake_api.put(_running("u1", "a"))
    fake_api.put(_running("u2", "b"))
    assert first_choice(board) == "a"  # without the watch: nothing counted
    watch = _watch(fake_api, kubeconfig, board)
    try:
        assert watch.placed == 2
        assert first_choice(board) == "c"  # zones a and b hold one each
        pending = pod(name="u3", generate_name="web-7d9c4b-")
        fake_api.put(pending)
        fake_api.put(_running("u4", "c"))
        wait_for(lambda: watch.placed == 3)
        bound = fake_api.get(PODS, "u3")
        assert bound is not None
        bound["spec"]["nodeName"] = "c"
        fake_api.put(bound)
        wait_for(lambda: watch.placed == 4)
        assert first_choice(board) == "a"  # c holds two: a and b are the fewest
        # Status updates of a counted pod change nothing.
        bound["status"] = {"phase": "Running", "podIP": "10.0.0.9"}
        fake_api.put(bound)
        terminating = fake_api.get(PODS, "u4")
        assert terminating is not None
        terminating["metadata"]["deletionTimestamp"] = "2020-01-01T01:00:00Z"
        fake_api.put(terminating)
        wait_for(lambda: watch.placed == 3)
        finished = fake_api.get(PODS, "u1")
        assert finished is not None
        finished["status"] = {"phase": "Succeeded"}
        fake_api.put(finished)
        wait_for(lambda: watch.placed == 2)
        assert first_choice(board) == "a"  # a holds none again, b and c one each
        fake_api.delete(PODS, "u2")
        fake_api.delete(PODS, "u4")  # terminating, uncounted already
        wait_for(lambda: watch.placed == 1)
        assert first_choice(board) == "a"
    finally:
        watch.stop()
        fake_api.close_watches()


def test_steered_pods_and_pods_of_no_workload_are_not_counted_here(fake_api, kubeconfig, board):
    """A steered pod is the binding watch's (its label); a bare pod has no
    workload to spread."""
    watch = _watch(fake_api, kubeconfig, board)
    try:
        steered = _running("s1", "a", labels={"app": "web", STEERED_BY: "replica0"})
        fake_api.put(steered)
        fake_api.put(_running("bare", "a", owner_kind=None))
        fake_api.put(_running("u1", "b"))
        wait_for(lambda: watch.placed == 1)
        assert first_choice(board) == "a"
        fake_api.delete(PODS, "bare")
        fake_api.delete(PODS, "u1")
        wait_for(lambda: watch.placed == 0)
    finally:
        watch.stop()
        fake_api.close_watches()


def test_lists_after_dropped_watches_forget_only_their_own_pods_deleted_meanwhile(
    fake_api, kubeconfig, board
):
    """After a 410, the unsteered pods' list forgets the unsteered pods
    deleted meanwhile; the steered pods' list leaves them counted."""
    unsteered = _watch(fake_api, kubeconfig, board)
    steered_watch = BindingWatch(api_client(kubeconfig), board.inflight, "replica1", 150.0)
    steered_watch.start()
    assert steered_watch.synced.wait(10)
    try:
        admitted = pod(name="s1", annotations={EXPECTED_BANDWIDTH: "1000"})
        decision = board.steerer.decide(admitted, {}, dry_run=False)
        steered = jsonpatch.apply_patch(admitted, decision.patch)
        steered["spec"]["nodeName"] = "a"
        fake_api.put(steered)
        fake_api.put(_running("u1", "b"))
        fake_api.put(_running("u2", "c"))
        wait_for(lambda: unsteered.placed == 2 and steered_watch.counts()["kept"] == 1)
        with fake_api.lock:  # no watch sees the deletion: both list again
            fake_api.delete(PODS, "u2")
            fake_api.compact()
            fake_api.put(pod(name="pending"))  # the lists' version: past the compaction
            fake_api.close_watches()
        wait_for(lambda: unsteered.relists == 2 and steered_watch.relists == 2)
        assert unsteered.placed == 1
        assert board.measure_at(MEASURED_AT + 3600) is not None  # s1's booking measured
        # a holds s1 and b u1; c none: u2 went with the list, u1 stayed.
        assert first_choice(board) == "c"
    finally:
        unsteered.stop()
        steered_watch.stop()
        fake_api.close_watches()
