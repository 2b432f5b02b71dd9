"""The traffic-tier label writer and its Lease election, against the fake
API server over HTTP: one leader writes, another takes over when the Lease
expires, labels change only past the hysteresis, a refused write is logged
and counted."""

import logging
import subprocess
import sys
import time
from dataclasses import replace

import pytest

from harness.fakeapi import node
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.lease import LeaseElection
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL, node_from_json
from kubectl_nettraffic.measuring.tier_labels import (
    TierLabeller,
    lease_namespace,
    remove_tier_labels,
)
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from tests.conftest import wait_for
from tests.harness.scoreboards import fixed_board

NODES = ("api/v1", None, "nodes")
LEASES = ("apis/coordination.k8s.io/v1", "kube-system", "leases")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _election(kubeconfig, identity, clock):
    return LeaseElection(
        api_client(kubeconfig), "kube-system", "tiers", identity, clock=clock, wall_clock=clock
    )


def test_one_leader_at_a_time_and_a_takeover_once_the_lease_expires(fake_api, kubeconfig):
    clock = Clock()
    first, second = _election(kubeconfig, "a", clock), _election(kubeconfig, "b", clock)
    assert first.try_acquire_or_renew() and first.is_leader()
    assert not second.try_acquire_or_renew() and not second.is_leader()
    lease = fake_api.get(LEASES, "tiers")
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 15
    clock.now += 10
    assert first.try_acquire_or_renew()  # renewed: the record changes ...
    clock.now += 10
    assert not second.try_acquire_or_renew()  # ... so b's 15 s start again from what it saw
    # a stops renewing (it hangs, or lost the API server): after its renew
    # deadline it no longer acts, and after the lease duration b takes over.
    clock.now += 11
    assert not first.is_leader()
    assert not second.try_acquire_or_renew()  # 11 s since b saw the last renew
    clock.now += 5
    assert second.try_acquire_or_renew() and second.is_leader()
    lease = fake_api.get(LEASES, "tiers")
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert not first.try_acquire_or_renew()  # a is back: b holds it now


def test_a_stopped_leader_releases_the_lease_for_its_successor(fake_api, kubeconfig):
    clock = Clock()
    first, second = _election(kubeconfig, "a", clock), _election(kubeconfig, "b", clock)
    assert first.try_acquire_or_renew()
    first.stop()
    assert fake_api.get(LEASES, "tiers")["spec"]["holderIdentity"] == ""
    assert second.try_acquire_or_renew()  # at once, not 15 s later


def test_of_two_candidates_for_an_expired_lease_only_one_wins(fake_api, kubeconfig):
    clock = Clock()
    first = _election(kubeconfig, "a", clock)
    second, third = _election(kubeconfig, "b", clock), _election(kubeconfig, "c", clock)
    assert first.try_acquire_or_renew()
    assert not second.try_acquire_or_renew() and not third.try_acquire_or_renew()
    clock.now += 20  # a is gone: expired for both b and c

    def b_first(method, path, body):
        # c has read the expired record and is about to take it: b takes it first.
        if method == "PUT" and body["spec"]["holderIdentity"] == "c" and not second.is_leader():
            assert second.try_acquire_or_renew()

    fake_api.before_request = b_first
    assert not third.try_acquire_or_renew()  # its update carried a stale resourceVersion: 409
    assert second.is_leader() and not third.is_leader()
    assert fake_api.get(LEASES, "tiers")["spec"]["holderIdentity"] == "b"


@pytest.fixture
def cluster(fake_api):
    loads = {f"n{i}": float(i) * 1e6 for i in range(8)}
    for name in loads:
        fake_api.put(node(name))
    return loads


def _labels(fake_api):
    return {
        name: (fake_api.get(NODES, name)["metadata"].get("labels") or {}).get(TIER_LABEL)
        for name in (f"n{i}" for i in range(8))
    }


def _with_labels(board, fake_api):
    """The board's snapshot as a refresh would take it now: measured now,
    with the nodes as the API server has them."""
    snapshot = board.snapshot
    nodes = {name: node_from_json(fake_api.get(NODES, name)) for name in snapshot.nodes}
    return replace(snapshot, nodes=nodes, generated_at=time.time())


def _labeller(kubeconfig, identity, clock, margin=0.05):
    election = _election(kubeconfig, identity, clock)
    return TierLabeller(api_client(kubeconfig), election, margin, writes_per_second=1000)


def test_only_the_leader_writes_and_only_what_changed(fake_api, kubeconfig, cluster):
    clock = Clock()
    leader, follower = _labeller(kubeconfig, "a", clock), _labeller(kubeconfig, "b", clock)
    assert leader.election.try_acquire_or_renew()
    assert not follower.election.try_acquire_or_renew()
    board = fixed_board(cluster)
    assert follower.label(_with_labels(board, fake_api)) == 0
    unlabelled = _with_labels(board, fake_api)
    assert leader.label(unlabelled) == 8
    # A snapshot whose node list was taken before those writes does not undo them.
    assert leader.label(unlabelled) == 0
    assert _labels(fake_api) == {
        "n0": "1",
        "n1": "1",
        "n2": "2",
        "n3": "2",
        "n4": "3",
        "n5": "3",
        "n6": "4",
        "n7": "4",
    }
    patches = [r for r in fake_api.requests if r.method == "PATCH"]
    assert {r.content_type for r in patches} == {"application/merge-patch+json"}
    assert all(
        r.body == {"metadata": {"labels": {TIER_LABEL: r.body["metadata"]["labels"][TIER_LABEL]}}}
        for r in patches
    )
    # The same ranking again: nothing to write.
    assert leader.label(_with_labels(board, fake_api)) == 0
    assert leader.status().writes == {"written": 8, "refused": 0, "failed": 0}
    # The leader's Lease expires; the follower takes over and finds nothing to change.
    clock.now += 20
    assert follower.election.try_acquire_or_renew()
    assert not leader.election.is_leader()
    assert leader.label(_with_labels(board, fake_api)) == 0
    assert follower.label(_with_labels(board, fake_api)) == 0


def test_a_replica_that_wins_the_lease_labels_from_the_snapshot_it_has(
    fake_api, kubeconfig, cluster
):
    # The leader stops (a rolling update): the next replica labels at its
    # next election retry, not a refresh later, from the snapshot it holds.
    leader = LeaseElection(api_client(kubeconfig), "kube-system", "tiers", "a")
    assert leader.try_acquire_or_renew()
    election = LeaseElection(api_client(kubeconfig), "kube-system", "tiers", "b", retry_period=0.2)
    labeller = TierLabeller(api_client(kubeconfig), election, 0.05, writes_per_second=1000)
    labeller.start()
    try:
        labeller.offer(_with_labels(fixed_board(cluster), fake_api))
        time.sleep(0.5)
        assert not any(_labels(fake_api).values())  # a follower writes nothing
        leader.stop()  # hands the Lease back
        wait_for(lambda: all(_labels(fake_api).values()), timeout=5)
    finally:
        labeller.stop()


def test_labels_change_only_past_the_hysteresis(fake_api, kubeconfig, cluster):
    clock = Clock()
    labeller = _labeller(kubeconfig, "a", clock, margin=0.1)
    assert labeller.election.try_acquire_or_renew()
    labeller.label(_with_labels(fixed_board(cluster), fake_api))
    # n1 (tier 1, rank 2 of 8: position 0.1875) swaps with n2: position 0.3125,
    # within tier 1's bound 0.25 + 0.1. n2 moves up into tier 1's range: it
    # is within tier 2's bounds widened by 0.1, so it stays too.
    swapped = dict(cluster, n1=2.5e6)
    assert labeller.label(_with_labels(fixed_board(swapped), fake_api)) == 0
    # Without the margin both would have swapped tiers.
    assert (
        len(
            _labeller(kubeconfig, "x", clock, margin=0.0).changes(
                _with_labels(fixed_board(swapped), fake_api)
            )
        )
        == 2
    )
    # n1 falls to the bottom: far past the margin, it is relabelled; the
    # nodes that move up one place each stay within theirs (n6, its link
    # six eighths as full as the busiest, stays busy and in tier 4).
    fallen = dict(cluster, n1=8e6)
    assert labeller.label(_with_labels(fixed_board(fallen), fake_api)) == 1
    assert _labels(fake_api)["n1"] == "4"


def test_a_refused_write_is_logged_with_the_fix_and_counted(fake_api, kubeconfig, cluster, caplog):
    clock = Clock()
    labeller = _labeller(kubeconfig, "a", clock)
    assert labeller.election.try_acquire_or_renew()
    fake_api.forbidden.add(("PATCH", "/api/v1/nodes"))
    with caplog.at_level(logging.WARNING, logger="kubectl_nettraffic.measuring.tier_labels"):
        assert labeller.label(_with_labels(fixed_board(cluster), fake_api)) == 0
    # RBAC refuses every node alike: one try per pass, not one per node.
    assert labeller.status().writes["refused"] == 1
    assert caplog.text.count("cannot set") == 1
    assert "RBAC forbids it: grant patch on nodes" in caplog.text
    assert "steering.trafficTiers" in labeller.status().last_error
    assert all(value is None for value in _labels(fake_api).values())


def test_a_write_refused_by_an_admission_policy_quotes_its_message(
    fake_api, kubeconfig, cluster, caplog
):
    clock = Clock()
    labeller = _labeller(kubeconfig, "a", clock)
    assert labeller.election.try_acquire_or_renew()
    denial = (
        "nodes \"n0\" is forbidden: ValidatingAdmissionPolicy 'nt-nettraffic-node-labels' with "
        "binding 'nt-nettraffic-node-labels' denied request: the nettraffic webhook may add or "
        "change only nettraffic.io/ labels on a Node"
    )
    fake_api.refused[("PATCH", "/api/v1/nodes")] = (403, "Forbidden", denial)
    with caplog.at_level(logging.WARNING, logger="kubectl_nettraffic.measuring.tier_labels"):
        labeller.label(_with_labels(fixed_board(cluster), fake_api))
    assert labeller.status().writes["refused"] == 8
    assert f"the API server refused it: {denial}" in caplog.text
    assert "RBAC" not in caplog.text


def test_cleanup_removes_every_tier_label(fake_api, kubeconfig, cluster):
    clock = Clock()
    labeller = _labeller(kubeconfig, "a", clock)
    assert labeller.election.try_acquire_or_renew()
    labeller.label(_with_labels(fixed_board(cluster), fake_api))
    fake_api.put(node("other", labels={"team": "x"}))
    removed = remove_tier_labels(api_client(kubeconfig))
    assert sorted(removed) == sorted(cluster)
    assert all(value is None for value in _labels(fake_api).values())
    assert TIER_LABEL not in fake_api.get(NODES, "other")["metadata"]["labels"]
    assert fake_api.get(NODES, "other")["metadata"]["labels"]["team"] == "x"


def test_each_node_s_zone_is_copied_and_cleaned_up(fake_api, kubeconfig):
    """nettraffic.io/zone: written beside the tier where it changes, one
    PATCH per node; taken off by the cleanup."""
    loads = {f"z{i}": float(i) * 1e6 for i in range(4)}
    zones = {"z0": "a", "z1": "a", "z2": "b"}  # z3 has no zone label
    for name in loads:
        labels = {ZONE_LABEL: zones[name]} if name in zones else {}
        fake_api.put(node(name, labels=labels))
    clock = Clock()
    election = _election(kubeconfig, "a", clock)
    copying = TierLabeller(api_client(kubeconfig), election, 0.05, 1000)
    assert election.try_acquire_or_renew()
    board = fixed_board(loads, **{n: {"labels": {ZONE_LABEL: z}} for n, z in zones.items()})
    assert copying.label(_with_labels(board, fake_api)) == 4  # one PATCH a node
    labels = {n: fake_api.get(NODES, n)["metadata"].get("labels") or {} for n in loads}
    assert {n: v.get(ZONE_COPY_LABEL) for n, v in labels.items()} == {
        "z0": "a",
        "z1": "a",
        "z2": "b",
        "z3": None,
    }
    assert all(v.get(TIER_LABEL) for v in labels.values())
    assert copying.label(_with_labels(board, fake_api)) == 0  # nothing changed
    assert sorted(remove_tier_labels(api_client(kubeconfig))) == sorted(loads)
    cleaned = {n: fake_api.get(NODES, n)["metadata"].get("labels") or {} for n in loads}
    assert all(TIER_LABEL not in v and ZONE_COPY_LABEL not in v for v in cleaned.values())
    assert cleaned["z2"][ZONE_LABEL] == "b"


def test_the_lease_namespace_is_the_pod_s_own_unless_configured(tmp_path, monkeypatch):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    missing = str(tmp_path / "none")
    assert lease_namespace("ops", missing) == "ops"
    assert lease_namespace("", missing) == "default"
    (tmp_path / "namespace").write_text("nettraffic\n")
    assert lease_namespace("", str(tmp_path / "namespace")) == "nettraffic"
    monkeypatch.setenv("POD_NAMESPACE", "from-env")
    assert lease_namespace("", str(tmp_path / "namespace")) == "from-env"


def _remove(kubeconfig, *extra):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kubectl_nettraffic.cli.main",
            "tiers",
            "remove",
            "--kubeconfig",
            kubeconfig,
            "--lease-namespace",
            "kube-system",
            "--lease-name",
            "tiers",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_uninstall_command_waits_for_the_writer_then_cleans_up(fake_api, kubeconfig, cluster):
    election = LeaseElection(api_client(kubeconfig), "kube-system", "tiers", "webhook-1")
    labeller = TierLabeller(api_client(kubeconfig), election, 0.05, writes_per_second=1000)
    assert election.try_acquire_or_renew()
    labeller.label(_with_labels(fixed_board(cluster), fake_api))
    # The webhook still holds the Lease: the cleanup waits, then says why it went ahead.
    started = time.monotonic()
    result = _remove(kubeconfig, "--wait", "3")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started >= 3
    assert "is still held by webhook-1 after 3s" in result.stderr
    assert "removed nettraffic.io/traffic-tier from 8 node(s)" in result.stdout
    assert all(value is None for value in _labels(fake_api).values())
    assert fake_api.get(LEASES, "tiers") is None
    # A writer that released its Lease: no wait.
    assert election.try_acquire_or_renew()
    labeller.label(_with_labels(fixed_board(cluster), fake_api))
    election.stop()
    started = time.monotonic()
    result = _remove(kubeconfig, "--wait", "30")
    assert result.returncode == 0 and time.monotonic() - started < 15, result.stderr
    assert "removed nettraffic.io/traffic-tier from 8 node(s)" in result.stdout
