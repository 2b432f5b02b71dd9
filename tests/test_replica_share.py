"""How replicas share the quiet nodes: hand-computed cases."""

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubectl_nettraffic.ranking.replica_share import (
    RATE_WINDOW,
    NodeBlocks,
    Replicas,
    ReplicaShare,
)
from tests.harness.choices import choose
from tests.harness.scoreboards import fixed_board

HORIZON = 130.0


def test_replicas_are_the_ids_seen_within_the_horizon_in_order():
    replicas = Replicas("r2", HORIZON)
    assert replicas.advance(100.0) is None  # alone
    replicas.saw("r2", 100.0)  # its own pods, seen again after a restart of its watch
    assert replicas.advance(100.0) is None
    replicas.saw("r1", 100.0)
    assert replicas.advance(150.0) == (1, 2)
    replicas.saw("r3", 120.0)
    assert replicas.advance(150.0) == (1, 3)
    replicas.saw("r1", 90.0)  # an older pod of r1's changes nothing
    assert replicas.advance(229.0) == (1, 3)
    assert replicas.advance(231.0) == (0, 2)  # r1 sent nothing new for 130 s
    replicas.saw("r3", 200.0)  # a newer pod keeps r3 counted
    assert replicas.advance(251.0) == (0, 2)
    assert replicas.advance(331.0) is None


def _concurrent_at(replicas, now):
    replicas.advance(now)
    return replicas.concurrent()


def test_a_whole_pod_counts_unseen_while_this_replica_admits():
    replicas = Replicas("r2", HORIZON)
    replicas.saw("r1", 100.0)
    assert _concurrent_at(replicas, 100.0) == 0.0  # admitting nothing lately
    replicas.admitted(100.0)  # one pod: a slow-start batch's first
    assert _concurrent_at(replicas, 100.0) == 1.0
    assert _concurrent_at(replicas, 100.0 + RATE_WINDOW * 0.99) == 1.0
    assert _concurrent_at(replicas, 100.0 + RATE_WINDOW) == 0.0  # the burst is over
    replicas.admitted(99.0)  # a pod admitted earlier, booked late, does not restart it
    assert _concurrent_at(replicas, 100.0 + RATE_WINDOW) == 0.0


def test_a_process_without_an_id_never_shares():
    replicas = Replicas(None, HORIZON)
    replicas.saw("r1", 100.0)
    assert replicas.advance(100.0) is None


_OWNERS = """
import json, sys
from kubectl_nettraffic.ranking.replica_share import NodeBlocks, ReplicaShare
names, count = json.loads(sys.argv[1]), int(sys.argv[2])
blocks = NodeBlocks(names, count)
print(json.dumps([[i for i in range(count) if ReplicaShare(i, blocks).owns(n)] for n in sorted(names)]))
"""


@pytest.mark.parametrize("count", [2, 3])
def test_every_replica_draws_the_same_blocks(count):
    """Each replica computes the owners in its own process, from the node
    list as its API answer orders it: they agree whatever each process's
    hash seed (str hashes differ per process) and the list's order, each
    node has one owner, and the replicas' blocks differ by one node at most."""
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
    replicas=st.integers(2, 5),
)
def test_a_node_added_or_removed_moves_at_most_one_node_across_each_edge(names, added, replicas):
    """Until every replica has listed the nodes again they draw the blocks
    over different lists: they disagree on the nodes that moved."""
    before = NodeBlocks(names, replicas)
    for listed in (names | {added}, names - {min(names)}):
        after = NodeBlocks(listed, replicas)
        moved = sum(before.block_of(n) != after.block_of(n) for n in names & listed)
        assert moved <= replicas - 1


def test_the_blocks_are_drawn_again_only_when_the_nodes_or_the_replicas_change():
    listed = {f"n{i}": object() for i in range(10)}  # name -> Node, as a snapshot lists them
    first = NodeBlocks.over(listed, 3, None)
    # The next refresh lists the same nodes (new objects, another order).
    assert NodeBlocks.over({name: object() for name in reversed(listed)}, 3, first) is first
    joined = NodeBlocks.over({**listed, "n10": object()}, 3, first)
    assert joined is not first
    assert joined.block_of("n10") == NodeBlocks(["n10", *listed], 3).block_of("n10")
    assert NodeBlocks.over(listed, 2, first).replicas == 2


def test_the_blocks_follow_the_crc32_order_and_a_node_not_listed_is_in_none():
    blocks = NodeBlocks(["a", "c", "d", "e"], 2)
    # crc32 order: c, d, a, e
    assert [blocks.block_of(n) for n in "acde"] == [1, 0, 0, 1]
    assert blocks.block_of("b") == -1  # a newer node list has it: no replica's own
    assert not ReplicaShare(0, blocks).owns("b") and not ReplicaShare(1, blocks).owns("b")


# In crc32 order c, d, a, e: c and d are replica 0's of 2, a and e replica 1's.
LOADS = {"a": 0.0, "d": 0.0, "c": 1e6, "e": 4e6}  # 2.5e-5 score points a byte/s
BLOCKS = NodeBlocks(LOADS, 2)
POD = 4e5  # 10 points


def _choose(loads, share, bandwidth=POD):
    chosen = choose(fixed_board(loads).snapshot, 3, bandwidth, share=share)
    # Each node with its score under the handicap, as points below the best's 100.
    return [(node, round(100 - (chosen[0][1] - score))) for node, score in chosen]


def test_alone_the_best_nodes_by_score():
    assert _choose(LOADS, None) == [("a", 100), ("d", 100), ("c", 75)]


def test_the_other_replicas_nodes_count_one_more_pod_of_this_size():
    # replica 0: a and e are the other's, 10 points lower
    assert _choose(LOADS, ReplicaShare(0, BLOCKS)) == [("d", 100), ("a", 90), ("c", 75)]
    # replica 1: c and d are the other's
    assert _choose(LOADS, ReplicaShare(1, BLOCKS)) == [("a", 100), ("d", 90), ("c", 65)]
    # a pod that books nothing sees the nodes as they are
    assert _choose(LOADS, ReplicaShare(0, BLOCKS), bandwidth=0.0) == _choose(LOADS, None)


def test_nothing_counts_while_this_replica_admits_nothing():
    assert _choose(LOADS, ReplicaShare(0, BLOCKS, 0.0)) == _choose(LOADS, None)
    assert _choose(LOADS, ReplicaShare(1, BLOCKS, 0.0)) == _choose(LOADS, None)


def test_another_replicas_node_better_by_more_than_the_pod_is_still_first():
    loads = {"a": 0.0, "d": 6e5, "e": 4e6}  # a 100, d 85, e 0; crc32 order d, a, e
    blocks = NodeBlocks(loads, 2)  # d and a replica 0's, e replica 1's
    assert _choose(loads, ReplicaShare(1, blocks)) == [("a", 100), ("d", 85), ("e", 10)]
