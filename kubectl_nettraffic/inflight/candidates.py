"""CandidateHeap: the eligible nodes by live score, kept current as pods are booked.

The mutable half of placement: scoring/placement.py grades what is read here.
"""

import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap

# When a CandidateHeap drops its superseded entries (a pass over the whole
# heap: 1.7 ms at 5,000 nodes). Walks that pass superseded entries pay for
# them on every read, so the heap drops them once its walks have passed a
# quarter of its length's worth since the last time: a node re-ranked below
# the root on every booking (a handicapped choice) is passed by every walk
# after, and at 5,000 nodes about 50 bookings of it bring the drop. Entries
# no walk passes (a heap read rarely: the shared one while a workload's own
# heap chooses) cost only memory, and go once there are as many as nodes.
PASSED_SHARE = 4

Ranked = tuple[float, int, NodeScore]  # (live score, position, score)


class HeapLayout:
    """What every heap over one snapshot's candidates shares, worked out once
    per snapshot: the nodes in order, each one's position and its group
    (``group_of``; one group when None). Read only."""

    def __init__(
        self, candidates: Sequence[NodeScore], group_of: Callable[[NodeScore], int] | None = None
    ) -> None:
        self.candidates = list(candidates)
        self.position = {score.name: position for position, score in enumerate(candidates)}
        self.group = [0 if group_of is None else group_of(s) for s in candidates]
        self.groups = 1 + max(self.group, default=0)


class CandidateHeap:
    """Eligible nodes ordered by live score, kept current as pods are booked.

    A node's live score is its measured score less the load booked on it
    that no measurement shows yet (``unseen``: the in-flight ledger's view,
    read, never copied: the ledger is its one keeper) and less ``points``
    of this heap's own (a workload's pods in flight, unknown_workloads.py;
    nodes kube-scheduler declined, declined_nodes.py).

    For the common pod without node constraints, the top N are read off a
    heap near its root, however many nodes carry in-flight load: a long burst
    that water-fills the whole cluster costs the same per pod as the first.
    A booking adds a fresh entry for its node; the node's older entry stays
    behind, superseded, and is dropped once it reaches the root.

    The layout's groups split the nodes into one heap each, for a
    handicap that is the same on every node of a group (the replica share:
    this replica's own nodes, and the others' by penalty per byte): the
    best of each group are then the group's top, and ``top_grouped`` merges
    them, reading a few nodes per group instead of walking past every
    handicapped node.

    Under load the heap's upper levels stay in the CPU's caches and its deep
    levels do not (at 5,000 nodes most entries are 7 to 12 levels down), so
    an admission costs what it touches deep down. Reading the top in place
    and replacing the root on a booking touch one root-to-leaf path per
    admission; popping the top N and pushing them back touched about ten.
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
        """``name``'s unseen load changed in the ledger's view (a booking,
        moved or dropped), and its own points by ``points``: re-rank it."""
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

    def top(self, count: int) -> list[Ranked]:
        """The best ``count`` as (live score, position, score), best first."""
        return list(itertools.islice(self.walk(), count))

    def top_grouped(
        self,
        count: int,
        handicaps: Sequence[float],
        rest: Handicap | None = None,
        exposed: int = 0,
    ) -> list[Ranked]:
        """The best ``count`` by live score less the handicap of their group
        (``handicaps[group]``) and less ``rest`` (a handicap of at most
        ``exposed`` nodes), as (that score, position, score), best first;
        ties go to the lower position, as in ``top``.

        Within a group the order is the live order, but for the ``exposed``
        nodes: so the group's best are among its first count + exposed."""
        best: list[tuple[float, int, NodeScore]] = []
        for group, handicap in zip(range(self.groups), handicaps, strict=False):
            for live, position, score in itertools.islice(self._walk(group), count + exposed):
                effective = live - handicap
                if rest is not None:
                    effective -= rest(score)
                best.append((effective, -position, score))
        best.sort(key=lambda entry: entry[:2], reverse=True)
        return [(effective, -negative, score) for effective, negative, score in best[:count]]

    def walk(self) -> Iterator[Ranked]:
        """Every valid entry as (live score, position, score), best first
        (ties by position): read as far as needed, then dropped. Nothing
        may be booked while it is read."""
        if self.groups == 1:
            return self._walk(0)
        return heapq.merge(
            *(self._walk(group) for group in range(self.groups)),
            key=lambda entry: (-entry[0], entry[1]),
        )

    def _walk(self, group: int) -> Iterator[Ranked]:
        heap, version = self._heaps[group], self._version
        while heap and heap[0][2] != version[heap[0][1]]:
            heapq.heappop(heap)  # superseded by a later booking
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
