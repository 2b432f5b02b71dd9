"""How replicas share the quiet nodes: hand-computed cases."""

import zlib

import pytest

from harness.reviews import pod
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.placement import choose_nodes
from kubectl_nettraffic.replica_share import RATE_WINDOW, WATCH_DELAY, Replicas, ReplicaShare
from tests.harness.scoreboards import fixed_board

HORIZON = 130.0


def _parts(share):
    return None if share is None else (share.part, share.parts)


def test_replicas_are_the_ids_seen_within_the_horizon_in_order():
    replicas = Replicas("r2", HORIZON)
    assert replicas.share(100.0) is None  # alone
    replicas.saw("r2", 100.0)  # its own pods, seen again after a restart of its watch
    assert replicas.share(100.0) is None
    replicas.saw("r1", 100.0)
    assert _parts(replicas.share(150.0)) == (1, 2)
    replicas.saw("r3", 120.0)
    assert _parts(replicas.share(150.0)) == (1, 3)
    replicas.saw("r1", 90.0)  # an older pod of r1's changes nothing
    assert _parts(replicas.share(229.0)) == (1, 3)
    assert _parts(replicas.share(231.0)) == (0, 2)  # r1 sent nothing new for 130 s
    replicas.saw("r3", 200.0)  # a newer pod keeps r3 counted
    assert _parts(replicas.share(251.0)) == (0, 2)
    assert replicas.share(331.0) is None


def test_the_unseen_part_is_this_replicas_pace_times_the_watch_delay():
    replicas = Replicas("r2", HORIZON)
    replicas.saw("r1", 100.0)
    assert replicas.share(100.0) == ReplicaShare(1, 2, 0.0)  # admitting nothing lately
    for i in range(10):  # 10 admissions in the last second: 10/s
        replicas.admitted(100.0 + i / 10)
    assert replicas.share(100.95) == ReplicaShare(1, 2, 10 / RATE_WINDOW * WATCH_DELAY)
    assert replicas.share(100.95).unseen == pytest.approx(0.5)
    # half a second later, the first five are out of the window
    assert replicas.share(101.45).unseen == pytest.approx(0.25)
    for i in range(40):  # 50/s: the others may be steering more than a pod unseen; one counts
        replicas.admitted(101.5 + i / 100)
    assert replicas.share(101.9).unseen == 1.0
    assert replicas.share(103.0).unseen == 0.0


def test_a_process_without_an_id_never_shares():
    replicas = Replicas(None, HORIZON)
    replicas.saw("r1", 100.0)
    assert replicas.share(100.0) is None


@pytest.mark.parametrize("count", [2, 3])
def test_every_node_belongs_to_exactly_one_replica(count):
    names = [f"node-{i}" for i in range(200)]
    owners = [[i for i in range(count) if ReplicaShare(i, count).owns(n)] for n in names]
    assert all(len(o) == 1 for o in owners)
    # crc32 of the name, so every replica draws the same lines
    assert [o[0] for o in owners] == [zlib.crc32(n.encode()) % count for n in names]
    # and each replica gets a fair part
    assert all(abs(sum(o[0] == i for o in owners) - 200 / count) < 30 for i in range(count))


# a and c are replica 1's of 2 (crc32 odd), d and e replica 0's.
LOADS = {"a": 0.0, "d": 0.0, "c": 1e6, "e": 4e6}  # 2.5e-5 score points a byte/s
POD = 4e5  # 10 points


def _choose(loads, share, bandwidth=POD):
    snap = fixed_board(loads).snapshot
    prefs = choose_nodes(
        snap.candidates, snap.tainted, snap.nodes, pod(), parse_selector(""), {}, 3,
        None, None if share is None else share.handicap(bandwidth),
    )  # fmt: skip
    return [(p.node, p.weight) for p in prefs]


def test_alone_the_best_nodes_by_score():
    assert _choose(LOADS, None) == [("a", 100), ("d", 100), ("c", 75)]


def test_the_other_replicas_nodes_count_one_more_pod_of_this_size():
    # replica 0: a and c are the other's, 10 points lower
    assert _choose(LOADS, ReplicaShare(0, 2)) == [("d", 100), ("a", 90), ("c", 65)]
    # replica 1: d is the other's
    assert _choose(LOADS, ReplicaShare(1, 2)) == [("a", 100), ("d", 90), ("c", 75)]
    # a pod that books nothing sees the nodes as they are
    assert _choose(LOADS, ReplicaShare(0, 2), bandwidth=0.0) == _choose(LOADS, None)


def test_the_other_replicas_nodes_count_the_unseen_part_of_a_pod():
    # half a pod: a and c lose 5 points for replica 0, d for replica 1
    assert _choose(LOADS, ReplicaShare(0, 2, 0.5)) == [("d", 100), ("a", 95), ("c", 70)]
    assert _choose(LOADS, ReplicaShare(1, 2, 0.5)) == [("a", 100), ("d", 95), ("c", 75)]
    # nothing unseen: the nodes as they are
    assert _choose(LOADS, ReplicaShare(0, 2, 0.0)) == _choose(LOADS, None)


def test_another_replicas_node_better_by_more_than_the_pod_is_still_first():
    loads = {"a": 0.0, "d": 6e5, "e": 4e6}  # a 100, d 85, e 0
    assert _choose(loads, ReplicaShare(0, 2)) == [("a", 100), ("d", 95), ("e", 10)]
