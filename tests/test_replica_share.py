"""How replicas share the quiet nodes: hand-computed cases."""

import json
import os
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.reviews import pod
from kubectl_nettraffic.inflight.replica_share import (
    DELAY_MOST,
    RATE_WINDOW,
    WATCH_DELAY,
    NodeParts,
    Replicas,
    ReplicaShare,
    WatchDelay,
)
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.scoring.placement import choose_nodes
from tests.harness.scoreboards import fixed_board

HORIZON = 130.0


def _share_at(replicas, now):
    replicas.advance(now)
    return replicas.share()


def _parts(share):
    return None if share is None else (share.part, share.parts)


def test_replicas_are_the_ids_seen_within_the_horizon_in_order():
    replicas = Replicas("r2", HORIZON)
    assert _share_at(replicas, 100.0) is None  # alone
    replicas.saw("r2", 100.0)  # its own pods, seen again after a restart of its watch
    assert _share_at(replicas, 100.0) is None
    replicas.saw("r1", 100.0)
    assert _parts(_share_at(replicas, 150.0)) == (1, 2)
    replicas.saw("r3", 120.0)
    assert _parts(_share_at(replicas, 150.0)) == (1, 3)
    replicas.saw("r1", 90.0)  # an older pod of r1's changes nothing
    assert _parts(_share_at(replicas, 229.0)) == (1, 3)
    assert _parts(_share_at(replicas, 231.0)) == (0, 2)  # r1 sent nothing new for 130 s
    replicas.saw("r3", 200.0)  # a newer pod keeps r3 counted
    assert _parts(_share_at(replicas, 251.0)) == (0, 2)
    assert _share_at(replicas, 331.0) is None


def test_a_whole_pod_counts_unseen_while_this_replica_admits():
    replicas = Replicas("r2", HORIZON)
    replicas.saw("r1", 100.0)
    assert _share_at(replicas, 100.0) == ReplicaShare(1, 2, 0.0)  # admitting nothing lately
    replicas.admitted(1, 100.0)  # one pod: a slow-start batch's first
    assert _share_at(replicas, 100.0).unseen == 1.0
    assert _share_at(replicas, 100.0 + RATE_WINDOW * 0.99).unseen == 1.0
    assert _share_at(replicas, 100.0 + RATE_WINDOW).unseen == 0.0  # the burst is over
    replicas.admitted(2, 99.0)  # a pod admitted earlier, booked late, does not restart it
    assert _share_at(replicas, 100.0 + RATE_WINDOW).unseen == 0.0


def test_the_watch_delay_is_measured_on_this_replicas_own_pods():
    delay = WatchDelay()
    assert delay.seconds == WATCH_DELAY  # nothing measured yet
    delay.admitted(1, 100.0)
    delay.shown(1, 100.25)  # 0.25 s: the average moves a tenth of the way
    assert delay.seconds == pytest.approx(0.05 + 0.1 * (0.25 - 0.05))
    delay.shown(1, 100.9)  # a later event of the same pod times nothing
    assert delay.seconds == pytest.approx(0.07)
    delay.shown(7, 101.0)  # a pod it did not admit (or forgot) times nothing
    assert delay.seconds == pytest.approx(0.07)
    delay.admitted(2, 101.0)
    delay.shown(2, 100.9)  # clocks a little apart: no negative delay
    assert delay.seconds == pytest.approx(0.07 + 0.1 * (0.0 - 0.07))


def test_a_pod_the_watch_never_shows_counts_as_a_whole_second():
    delay = WatchDelay()
    delay.admitted(1, 100.0)
    delay.admitted(2, 100.5)  # 1 is not a second old yet: still waiting
    assert delay.seconds == WATCH_DELAY
    delay.admitted(3, 101.0)  # 1 is: it counts as DELAY_MOST
    assert delay.seconds == pytest.approx(0.05 + 0.1 * (DELAY_MOST - 0.05))
    for key in range(4, 60):  # the watch is down: the estimate climbs to DELAY_MOST
        delay.admitted(key, 100.0 + key)
    assert delay.seconds == pytest.approx(DELAY_MOST, abs=0.01)
    delay.shown(2, 200.0)  # shown long after it was counted: times nothing more
    assert delay.seconds == pytest.approx(DELAY_MOST, abs=0.01)


def test_without_an_id_no_delay_is_timed():
    replicas = Replicas(None, HORIZON)
    for key in range(50):  # no watch shows them: nothing is waited for
        replicas.admitted(key, 100.0 + key)
    assert replicas.delay.seconds == WATCH_DELAY


def test_a_process_without_an_id_never_shares():
    replicas = Replicas(None, HORIZON)
    replicas.saw("r1", 100.0)
    assert _share_at(replicas, 100.0) is None


_OWNERS = """
import json, sys
from kubectl_nettraffic.inflight.replica_share import NodeParts, ReplicaShare
names, count = json.loads(sys.argv[1]), int(sys.argv[2])
lines = NodeParts(names, count)
print(json.dumps([[i for i in range(count) if ReplicaShare(i, count, lines=lines).owns(n)] for n in sorted(names)]))
"""


@pytest.mark.parametrize("count", [2, 3])
def test_every_replica_draws_the_same_lines(count):
    """Each replica computes the owners in its own process, from the node
    list as its API answer orders it: they agree whatever each process's
    hash seed (str hashes differ per process) and the list's order, each
    node has one owner, and the replicas' parts differ by one node at most."""
    names = [f"node-{i}" for i in range(200)]
    owners = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _OWNERS, json.dumps(listed), str(count)],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONHASHSEED": seed},
            ).stdout
        )
        for seed, listed in (("1", names), ("2", names[::-1]))
    ]
    assert owners[0] == owners[1]
    assert all(len(o) == 1 for o in owners[0])
    sizes = [sum(o[0] == i for o in owners[0]) for i in range(count)]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=200, deadline=None)
@given(
    names=st.sets(
        st.text("abcdefghij-0123456789", min_size=1, max_size=12), min_size=1, max_size=80
    ),
    added=st.text("abcdefghij-0123456789", min_size=1, max_size=12),
    parts=st.integers(2, 5),
)
def test_a_node_added_or_removed_moves_at_most_one_node_across_each_line(names, added, parts):
    """Until every replica has listed the nodes again they draw the lines
    over different lists: they disagree on the nodes that moved."""
    before = NodeParts(names, parts)
    for listed in (names | {added}, names - {min(names)}):
        after = NodeParts(listed, parts)
        assert sum(before.part_of(n) != after.part_of(n) for n in names & listed) <= parts - 1


def test_the_lines_are_drawn_again_only_when_the_nodes_or_the_parts_change():
    listed = {f"n{i}": object() for i in range(10)}  # name -> Node, as a snapshot lists them
    first = NodeParts.over(listed, 3, None)
    # The next refresh lists the same nodes (new objects, another order).
    assert NodeParts.over({name: object() for name in reversed(listed)}, 3, first) is first
    joined = NodeParts.over({**listed, "n10": object()}, 3, first)
    assert joined is not first and joined.part_of("n10") == NodeParts(["n10", *listed], 3).part_of(
        "n10"
    )
    assert NodeParts.over(listed, 2, first).parts == 2


def test_a_node_not_listed_goes_by_its_hash():
    lines = NodeParts(["a", "c", "d", "e"], 2)
    # listed: c and d first in crc32 order, then a and e
    assert [lines.part_of(n) for n in "acde"] == [1, 0, 0, 1]
    # not listed (a newer node list has it): crc32 modulo the parts
    assert [lines.part_of(n) for n in ("b", "f", "g")] == [
        zlib.crc32(n.encode()) % 2 for n in "bfg"
    ]
    assert NodeParts([], 3).part_of("a") == zlib.crc32(b"a") % 3


# Listed nowhere (no lines): a and c are replica 1's of 2 (crc32 odd), d and
# e replica 0's.
LOADS = {"a": 0.0, "d": 0.0, "c": 1e6, "e": 4e6}  # 2.5e-5 score points a byte/s
POD = 4e5  # 10 points


def _choose(loads, share, bandwidth=POD):
    snap = fixed_board(loads).snapshot
    prefs = choose_nodes(
        snap.candidates, snap.tainted, snap.nodes, pod(), parse_selector(""), {}, 3,
        None, None if share is None else share.handicap(bandwidth),
    )  # fmt: skip
    # Each node with its score under the handicap, as points below the best's
    # 100 (the weights sent are capped by rank as well: test_placement.py).
    return [(p.node, round(100 - (prefs[0].score - p.score))) for p in prefs]


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
