"""CandidateHeap: the eligible nodes by live score, kept current as pods are booked.

The mutable half of placement: scoring/placement.py grades what is read here.
"""

import heapq
import itertools
from collections.abc import Iterator, Mapping, Sequence

from kubectl_nettraffic.scoring.node_scores import NodeScore

# Superseded entries a CandidateHeap keeps before it drops them all: a walk
# passes at most this many, and dropping them costs a pass over the heap,
# so each booking pays for it a few entries' worth.
SUPERSEDED_MOST = 64


class CandidateHeap:
    """Eligible nodes ordered by live score, kept current as pods are booked.

    For the common pod without node constraints, the top N are read off a
    heap near its root, however many nodes carry in-flight load: a long burst
    that water-fills the whole cluster costs the same per pod as the first.
    A booking adds a fresh entry for its node; the node's older entry stays
    behind, superseded, and is dropped once it reaches the root.

    Under load the heap's upper levels stay in the CPU's caches and its deep
    levels do not (at 5,000 nodes most entries are 7 to 12 levels down), so
    an admission costs what it touches deep down. Reading the top in place
    and replacing the root on a booking touch one root-to-leaf path per
    admission; popping the top N and pushing them back touched about ten.
    """

    def __init__(
        self, candidates: Sequence[NodeScore], inflight: Mapping[str, tuple[float, int]]
    ) -> None:
        self._candidates = list(candidates)
        self._position = {score.name: position for position, score in enumerate(candidates)}
        self._extra = [inflight.get(score.name, (0.0, 0))[0] for score in candidates]
        # Entries are (-live score, position, version); only the newest version
        # of a position is valid, so a booking never leaves a duplicate behind.
        self._version = [0] * len(self._candidates)
        self._heap = [
            (-score.score_with(self._extra[i]), i, 0) for i, score in enumerate(candidates)
        ]
        heapq.heapify(self._heap)

    def book(self, name: str, bandwidth: float) -> None:
        position = self._position.get(name)
        if position is None:
            return  # a tainted node chosen for a tolerating pod: not in this heap
        self._extra[position] += bandwidth
        self._version[position] += 1
        live = self._candidates[position].score_with(self._extra[position])
        entry = (-live, position, self._version[position])
        if self._heap and self._heap[0][1] == position:
            # The usual booking: the best node, whose entry is the root. Any
            # entry of this node is superseded now: replace it in one pass down.
            heapq.heapreplace(self._heap, entry)
            return
        heapq.heappush(self._heap, entry)
        # A node chosen under a handicap is not the root, and its superseded
        # entry, at its better score of before, stays above the valid ones,
        # where every top() walks past it: past SUPERSEDED_MOST of them, keep
        # only the valid entries (every node has exactly one).
        if len(self._heap) - len(self._candidates) > SUPERSEDED_MOST:
            version = self._version
            self._heap = [e for e in self._heap if e[2] == version[e[1]]]
            heapq.heapify(self._heap)

    def top(self, count: int) -> list[tuple[float, int, NodeScore]]:
        """The best ``count`` as (live score, position, score), best first."""
        return list(itertools.islice(self.walk(), count))

    def walk(self) -> Iterator[tuple[float, int, NodeScore]]:
        """Every valid entry as (live score, position, score), best first
        (ties by position): read as far as needed, then dropped. Nothing
        may be booked while it is read."""
        heap, version = self._heap, self._version
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
            # (else superseded; its subtree may still hold valid ones)
            child = 2 * index + 1
            if child < size:
                heapq.heappush(frontier, (heap[child], child))
                if child + 1 < size:
                    heapq.heappush(frontier, (heap[child + 1], child + 1))
