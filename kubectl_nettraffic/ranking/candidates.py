"""The candidate heaps: the eligible nodes by live score, kept current as
pods are booked (CandidateHeap), and one snapshot's set of them (Heaps):
the shared heap, in groups, and the unlearned workloads' own; and the one
exact choice read off them (``CandidateHeap.best``). The mutable half of
placement: scoring/placement.py grades what is chosen here.
"""

import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import (
    Callable,
    Container,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from kubectl_nettraffic.kube.nodes import zones_of
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.ranking.handicaps import POINTS_PER_POD
from kubectl_nettraffic.ranking.replica_share import NodeBlocks, ReplicaShare
from kubectl_nettraffic.scoring.node_scores import NodeScore

# A heap drops its superseded entries (a pass over it: 1.7 ms at 5,000
# nodes) once its walks have passed a quarter of its length's worth of them
# since the last drop, or it holds twice its nodes.
PASSED_SHARE = 4
# With this many distinct penalties per byte (link speeds) or more, the heap
# is not split by them: a choice reckons each node's link as it reads it.
MOST_GROUPS = 16
# At most this many unlearned workloads' own heaps are kept (those chosen
# for last); each booking updates every one of them.
MOST_OWN_HEAPS = 8

Ranked = tuple[float, int, NodeScore]  # (live score, position, score)


class Group(NamedTuple):
    """What every node of one group of a heap has in common."""

    zone: str  # "" for the nodes without one
    penalty: float | None  # penalty per byte (link speed); None: of several
    owned: bool  # this replica's own node (every node, without the replica share)


class HeapLayout:
    """What every heap over one snapshot's candidates shares, worked out once
    per snapshot: the nodes in order, each one's position and its group, the
    groups in the order first met (``key_of``: a node's group; one group
    when None). Read only."""

    def __init__(
        self,
        candidates: Sequence[NodeScore],
        key_of: Callable[[NodeScore], Hashable] | None = None,
    ) -> None:
        self.candidates = list(candidates)
        self.position = {score.name: position for position, score in enumerate(candidates)}
        index: dict[Hashable, int] = {}
        self.group = [
            0 if key_of is None else index.setdefault(key_of(s), len(index)) for s in candidates
        ]
        self.keys: list[Hashable] = list(index) or [None]
        self.groups = len(self.keys)


class Points(Protocol):
    """The points each node gains (below zero: loses) for one pod, beside its
    live score (ranking/node_points.py's NodePoints): exact per node, and
    bounded per group, so that a walk best first knows when to stop."""

    uniform: bool  # every node gains exactly its group's bound

    def bound(self, group: int) -> float:
        """The most any node of ``group`` gains, but for ``raised`` ones;
        -inf: none may be chosen."""
        ...

    def of(self, score: NodeScore, group: int) -> float:
        """What the node gains exactly; -inf: it may not be chosen."""
        ...

    def raised(self) -> Iterator[tuple[str, float]]:
        """The nodes that may gain more than their group's bound, as (node,
        the most beyond it), the most first."""
        ...


class CandidateHeap:
    """Eligible nodes ordered by live score, kept current as pods are booked.

    A node's live score is its measured score less its unseen load (the
    bookings store's view, read, never copied) and less ``points`` of this
    heap's own (an unlearned workload's pods in flight, nodes declined).
    The top N are read near the root whatever is in flight; a booking adds
    a fresh entry for its node (replacing the root when the best node is
    booked) and the older one is dropped when it reaches the root. The
    layout's groups split the nodes into one heap each, for a handicap the
    same on every node of a group (a link speed, the replica share):
    ``top_grouped`` reads a few nodes per group. Why, and what it costs:
    docs/design/admission-performance.md, "The path".
    """

    def __init__(
        self,
        layout: HeapLayout,
        unseen: Mapping[str, tuple[float, int]],
        points: Mapping[str, float] | None = None,
    ) -> None:
        self._candidates = layout.candidates
        self._unseen = unseen
        self._position = layout.position
        points = points or {}
        self._points = [points.get(score.name, 0.0) for score in self._candidates]
        self._group = layout.group
        self.groups = layout.groups
        # Entries are (-live score, position, version); only the newest version
        # of a position is valid, so a booking never leaves a duplicate behind.
        self._version = [0] * len(self._candidates)
        self._heaps: list[list[tuple[float, int, int]]] = [[] for _ in range(self.groups)]
        for i, score in enumerate(self._candidates):
            live = score.score_with(unseen.get(score.name, (0.0, 0))[0]) - self._points[i]
            self._heaps[self._group[i]].append((-live, i, 0))
        for heap in self._heaps:
            heapq.heapify(heap)
        self._sizes = [len(heap) for heap in self._heaps]
        # Superseded entries walks passed since the group's last drop.
        self._passed = [0] * self.groups

    def update(self, name: str, points: float = 0.0) -> None:
        """``name``'s unseen load changed (a booking, moved or dropped), and
        its own points by ``points``: re-rank it."""
        position = self._position.get(name)
        if position is None:
            return  # a tainted node chosen for a tolerating pod: not in this heap
        if points:
            self._points[position] += points
        self._version[position] += 1
        live = self._candidates[position].score_with(self._unseen.get(name, (0.0, 0))[0])
        entry = (self._points[position] - live, position, self._version[position])
        group = self._group[position]
        heap = self._heaps[group]
        if heap and heap[0][1] == position:
            # The usual booking: the best node, whose entry is the root. Any
            # entry of this node is superseded now: replace it in one pass down.
            heapq.heapreplace(heap, entry)
            return
        heapq.heappush(heap, entry)
        # A node chosen under a handicap is not the root, and its superseded
        # entry, at its better score of before, stays above the valid ones,
        # where every walk passes it until it is dropped (PASSED_SHARE); a
        # node booked from another heap leaves its entry wherever it was.
        size = self._sizes[group]
        if self._passed[group] * PASSED_SHARE > size or len(heap) > 2 * size:
            version = self._version
            heap[:] = [e for e in heap if e[2] == version[e[1]]]
            heapq.heapify(heap)
            self._passed[group] = 0

    def live(self, name: str) -> Ranked | None:
        """``name``'s live score as the heap ranks it now; None when the
        node is not a candidate here."""
        position = self._position.get(name)
        if position is None:
            return None
        score = self._candidates[position]
        live = score.score_with(self._unseen.get(name, (0.0, 0))[0]) - self._points[position]
        return live, position, score

    def _valid_root(self, group: int) -> list[tuple[float, int, int]]:
        """One group's heap, its root's superseded entries popped."""
        heap, version = self._heaps[group], self._version
        while heap and heap[0][2] != version[heap[0][1]]:
            heapq.heappop(heap)  # superseded by a later booking
        return heap

    def top(self, count: int) -> list[Ranked]:
        """The best ``count`` as (live score, position, score), best first."""
        return list(itertools.islice(self.walk(), count))

    def best(self, count: int, points: Points) -> list[Ranked]:
        """The best ``count`` by live score plus ``points`` (exact), as (that
        score, position, score), best first; ties go to the lower position.

        Each group is read best first by live score, the groups whose best
        could reach furthest first, until even the group's bound cannot lift
        the next node to the count-th kept (the bar); then the nodes that
        may gain more than their group's bound (``points.raised``), looked
        up one by one, the most first, until even the best live score with
        that much cannot reach the bar. A node ``points`` excludes (-inf)
        is never kept. Nothing is capped: every node that could make the
        count is read.
        """
        kept: list[tuple[float, int, NodeScore]] = []  # the best ``count``, worst first
        bar = -math.inf  # what a node must reach to be kept: the count-th's score
        uniform = points.uniform
        raising = not uniform
        read: set[int] = set()

        def consider(
            live: float, position: int, score: NodeScore, group: int, bound: float
        ) -> None:
            nonlocal bar
            effective = live + (bound if uniform else points.of(score, group))
            if effective == -math.inf:
                return  # excluded
            entry = (effective, -position, score)
            if len(kept) < count:
                heapq.heappush(kept, entry)
            elif entry[:2] > kept[0][:2]:
                heapq.heapreplace(kept, entry)
            else:
                return
            if len(kept) == count:
                bar = kept[0][0]

        heads = []
        for group in range(self.groups):
            bound = points.bound(group)
            if bound == -math.inf:
                continue
            heap = self._valid_root(group)
            if heap:
                heads.append((bound - heap[0][0], group, bound))
        heads.sort(key=lambda head: (-head[0], head[1]))
        for most, group, bound in heads:
            if most < bar:
                break  # nor can any later group's best
            for live, position, score in self._walk(group):
                if live + bound < bar:
                    break  # nor can any after it in this group
                if raising:
                    read.add(position)
                consider(live, position, score, group, bound)
        if raising:
            # No node's live score plus its group's bound is above the best head's.
            ceiling = heads[0][0] if heads else -math.inf
            for name, beyond in points.raised():
                if ceiling + beyond < bar:
                    break  # nor can any node raised less
                ranked = self.live(name)
                if ranked is None or ranked[1] in read:
                    continue  # not a candidate here, or read already
                live, position, score = ranked
                group = self._group[position]
                if live + points.bound(group) + beyond >= bar:
                    consider(live, position, score, group, 0.0)
        kept.sort(key=lambda entry: entry[:2], reverse=True)
        return [(effective, -negative, score) for effective, negative, score in kept]

    def walk(self) -> Iterator[Ranked]:
        """Every valid entry as (live score, position, score), best first
        (ties by position), the groups merged: read as far as needed, then
        dropped. Nothing may be booked while it is read."""
        if self.groups == 1:
            return self._walk(0)
        walks = [self._walk(group) for group in range(self.groups)]
        return heapq.merge(*walks, key=lambda ranked: (-ranked[0], ranked[1]))

    def _walk(self, group: int) -> Iterator[Ranked]:
        heap, version = self._valid_root(group), self._version
        # No entry beats its parent, so a best-first walk down from the root
        # meets the valid entries best first.
        frontier = [(heap[0], 0)] if heap else []
        size = len(heap)
        while frontier:
            (negative, position, entry_version), index = heapq.heappop(frontier)
            if entry_version == version[position]:
                yield -negative, position, self._candidates[position]
            else:  # superseded; its subtree may still hold valid ones
                self._passed[group] += 1
            child = 2 * index + 1
            if child < size:
                heapq.heappush(frontier, (heap[child], child))
                if child + 1 < size:
                    heapq.heappush(frontier, (heap[child + 1], child + 1))


def own_heap(
    layout: HeapLayout,
    view: Mapping[str, tuple[float, int]],
    pods: Mapping[str, int],
    declined: Mapping[str, float],
) -> CandidateHeap:
    """An unlearned workload's heap: its ``pods`` in flight per node count
    against their nodes, as the ``declined`` nodes' points do."""
    points = dict(declined)
    for node, count in pods.items():
        points[node] = points.get(node, 0.0) + POINTS_PER_POD * count
    return CandidateHeap(layout, view, points)


@dataclass
class Heaps:
    """One snapshot's heaps: the shared one and the unlearned workloads' own
    (most recently chosen last), over one layout.

    The layout groups the nodes by what a pod's points depend on alike on
    every node of a group (``Group``): the zone (a peer's pull, the
    workload's spread), the penalty per byte (a slower link loses more
    points to the pod's own bytes), and with the replica share, this
    replica's own nodes apart from the others'. ``penalties``: the distinct
    penalties, least first (None: too many to group by, and each node's
    link is reckoned as it is read)."""

    shared: CandidateHeap
    own: OrderedDict[Workload, CandidateHeap]
    layout: HeapLayout
    penalties: list[float] | None
    least_penalty: float  # the fastest link's
    blocks: NodeBlocks | None  # the nodes' blocks among the replicas
    share: ReplicaShare | None  # this replica's place among them, when grouped by it
    zone_of: Mapping[str, str]  # node -> zone, for the nodes that have one
    zones: frozenset[str]  # the zones with a candidate

    @property
    def groups(self) -> list[Group]:
        return self.layout.keys  # type: ignore[return-value]  # Heaps.build's keys are Groups

    def update(self, node: str) -> None:
        """``node``'s unseen load changed, and no unlearned count: the shared heap."""
        self.shared.update(node)

    @classmethod
    def build(
        cls,
        snapshot: Snapshot,
        view: Mapping[str, tuple[float, int]],
        grouped_by: tuple[int, int] | None,
        in_flight: Mapping[Workload, Mapping[str, int]],
        declined: Mapping[str, float],
        blocks: NodeBlocks | None,
    ) -> "Heaps":
        """Ranked by ``view`` less the ``declined`` points, grouped by zone,
        link speed and the replica share ``grouped_by`` (place, replicas),
        an own heap for each workload of ``in_flight``. Reads nothing else:
        it may run beside the admissions."""
        candidates = snapshot.candidates
        distinct = sorted({score.penalty_per_byte for score in candidates})
        penalties = distinct if len(distinct) < MOST_GROUPS else None
        share = None
        if grouped_by is not None:
            blocks = NodeBlocks.over(snapshot.nodes, grouped_by[1], blocks)
            share = ReplicaShare(grouped_by[0], blocks)
        zone_of = zones_of(snapshot.nodes.values())

        def key_of(score: NodeScore) -> Group:
            return Group(
                zone_of.get(score.name, ""),
                None if penalties is None else score.penalty_per_byte,
                share is None or share.owns(score.name),
            )

        layout = HeapLayout(candidates, key_of)
        own = OrderedDict((w, own_heap(layout, view, p, declined)) for w, p in in_flight.items())
        return cls(
            CandidateHeap(layout, view, declined),
            own,
            layout,
            penalties,
            distinct[0] if distinct else 0.0,
            blocks,
            share,
            zone_of,
            frozenset(zone_of[s.name] for s in candidates if s.name in zone_of),
        )

    def own_for(
        self,
        workload: Workload,
        pods: Mapping[str, int],
        view: Mapping[str, tuple[float, int]],
        declined: Mapping[str, float],
    ) -> CandidateHeap:
        """``workload``'s own heap, built when it has none."""
        heap = self.own.get(workload)
        if heap is not None:
            self.own.move_to_end(workload)
            return heap
        heap = self.own[workload] = own_heap(self.layout, view, pods, declined)
        if len(self.own) > MOST_OWN_HEAPS:
            self.own.popitem(last=False)
        return heap

    def rerank(
        self,
        nodes: Iterable[str],
        counted: Sequence[tuple[Workload, str, int]],
        in_flight: Container[Workload],
    ) -> None:
        """The unseen load of ``nodes`` changed, and the unlearned counts as
        ``counted`` (workload, node, pods) says: re-rank them. The own heaps
        of workloads no longer ``in_flight`` go."""
        points: dict[tuple[Workload, str], float] = {}
        for workload, node, pods in counted:
            points[workload, node] = points.get((workload, node), 0.0) + POINTS_PER_POD * pods
        for node in nodes:
            self.update(node)
            for workload, heap in self.own.items():
                heap.update(node, points.pop((workload, node), 0.0))
        for (workload, node), change in points.items():  # counts alone changed
            own = self.own.get(workload)
            if own is not None:
                own.update(node, change)
        for workload in {workload for workload, _, _ in counted}:
            if workload in self.own and workload not in in_flight:
                del self.own[workload]

    def decline(self, node: str, points: float) -> None:
        """``node`` was declined: it loses ``points`` in every heap."""
        for heap in (self.shared, *self.own.values()):
            heap.update(node, points)
