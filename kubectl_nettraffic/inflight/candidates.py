"""The candidate heaps: the eligible nodes by live score, kept current as
pods are booked (CandidateHeap), and one snapshot's set of them (Heaps):
the shared heap, grouped for the replica share, and the unlearned
workloads' own. The mutable half of placement: scoring/placement.py grades
what is read here.
"""

import heapq
import itertools
import math
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kubectl_nettraffic.inflight.handicaps import POINTS_PER_POD
from kubectl_nettraffic.inflight.replica_share import NodeBlocks, ReplicaShare
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap, Pull, link_handicap, link_points

# A heap drops its superseded entries (a pass over it: 1.7 ms at 5,000
# nodes) once its walks have passed a quarter of its length's worth of them
# since the last drop, or it holds twice its nodes.
PASSED_SHARE = 4
# With this many distinct penalties per byte (link speeds) or more, the heap
# is not split by them, and a choice walks it (handicapped_top).
MOST_GROUPS = 16
# At most this many unlearned workloads' own heaps are kept (those chosen
# for last); each booking updates every one of them.
MOST_OWN_HEAPS = 8

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

    def group_head(self, group: int) -> Ranked | None:
        """The best of one group; None when it has no node."""
        heap = self._valid_root(group)
        if not heap:
            return None
        negative, position, _ = heap[0]
        return -negative, position, self._candidates[position]

    def _valid_root(self, group: int) -> list[tuple[float, int, int]]:
        """One group's heap, its root's superseded entries popped."""
        heap, version = self._heaps[group], self._version
        while heap and heap[0][2] != version[heap[0][1]]:
            heapq.heappop(heap)  # superseded by a later booking
        return heap

    def group_walk(self, group: int) -> Iterator[Ranked]:
        """One group's valid entries, best first, as ``walk`` reads them."""
        return self._walk(group)

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
        """The best ``count`` by live score less their group's handicap
        (``handicaps[group]``) and less ``rest`` (a handicap of at most
        ``exposed`` nodes, so a group's best are among its first count +
        exposed), as (that score, position, score), best first; ties go to
        the lower position, as in ``top``."""
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


class ZonePull(Pull, Protocol):
    """A pull the same on every node of a zone but for a few nodes of its
    own (steering/peer_pull.py's PodPull)."""

    @property
    def zone_of(self) -> Mapping[str, str]:
        """node -> zone, for the nodes that have one."""
        ...

    def zone_points(self, zone: str) -> float:
        """The most a node of ``zone`` gains for the zone alone."""
        ...

    def own_nodes(self) -> Iterator[tuple[str, float]]:
        """The nodes that gain more than their zone, as (node, the points
        beyond its zone), the most first."""
        ...

    def most_on(self, node: str) -> float:
        """The most ``node`` can gain: its own part and its zone's."""
        ...


def pulled_top(
    zoned: CandidateHeap,
    zones: Sequence[str],
    shared: CandidateHeap,
    count: int,
    pull: ZonePull,
    rest: Handicap | None,
) -> list[Ranked]:
    """The best ``count`` by live score plus ``pull`` less ``rest``, best
    first; ties go to the lower position. Exact, and it reads few nodes:
    each zone's nodes best first by live score (the heap grouped by zone,
    ``zones[group]``) until even its zone's pull cannot lift the next one
    to the count-th kept (the bar); then the nodes that gain more than
    their zone (``pull.own_nodes``), looked up one by one, the most pulled
    first, until even the best live score with that pull cannot reach the
    bar. ``rest`` and the hot guard (which takes a pull away) only lower a
    node below such a bound."""
    kept: list[tuple[float, int, NodeScore]] = []  # the best ``count``, worst first
    read: set[int] = set()
    bar = -math.inf  # what a node must reach to be kept: the count-th's score

    def consider(live: float, position: int, score: NodeScore) -> None:
        nonlocal bar
        effective = live + pull.points(score)
        if rest is not None:
            effective -= rest(score)
        read.add(position)
        entry = (effective, -position, score)
        if len(kept) < count:
            heapq.heappush(kept, entry)
        elif entry[:2] > kept[0][:2]:
            heapq.heapreplace(kept, entry)
        if len(kept) == count:
            bar = kept[0][0]

    # The zones whose best node could score most first: once a zone's best
    # cannot reach the bar, nor can any later zone's.
    heads = []
    for group, zone in enumerate(zones):
        head = zoned.group_head(group)
        if head is not None:
            lift = pull.zone_points(zone)
            heads.append((head[0] + lift, group, lift))
    heads.sort(key=lambda head: (-head[0], head[1]))
    for most, group, lift in heads:
        if most < bar:
            break
        for live, position, score in zoned.group_walk(group):
            if live + lift < bar:
                break  # nor can any after it in this zone
            consider(live, position, score)
    # No node's live score is above the best zone's best, nor its zone's
    # pull above the most of any zone.
    ceiling = max((most - lift for most, _, lift in heads), default=-math.inf)
    most_lift = max((lift for _, _, lift in heads), default=0.0)
    for node, own in pull.own_nodes():
        if ceiling + most_lift + own < bar:
            break  # nor can any node pulled less
        entry = shared.live(node)
        if entry is None or entry[1] in read or entry[0] + pull.most_on(node) < bar:
            continue
        consider(*entry)
    kept.sort(key=lambda entry: entry[:2], reverse=True)
    return [(effective, -negative, score) for effective, negative, score in kept]


@dataclass
class Heaps:
    """One snapshot's heaps: the shared one and the unlearned workloads' own
    (most recently chosen last), over one layout; and, once a pod with
    peers is chosen for, one grouped by zone (``zones[group]``, "" for the
    nodes without one).

    The layout groups the nodes by penalty per byte (their link speed), so
    that a pod's own bytes, which cost a slower link more points, are a
    handicap the same on every node of a group (``group_handicaps``); with
    the replica share, this replica's own nodes apart from the others'.
    With one penalty and no share there is one group. ``penalties``: the
    groups' penalties, least first (None: too many to group by, and one
    group)."""

    shared: CandidateHeap
    own: OrderedDict[Workload, CandidateHeap]
    layout: HeapLayout
    penalties: list[float] | None
    least_penalty: float  # the fastest link's
    replica_grouped: bool  # the groups after the penalties' are the other replicas' nodes
    blocks: NodeBlocks | None  # the nodes' blocks among the replicas
    zoned: CandidateHeap | None = None
    zones: tuple[str, ...] = ()

    def link_handicap(self, bandwidth: float) -> Handicap | None:
        """scoring/placement.py's ``link_handicap`` over these candidates;
        None when every link is alike."""
        if self.penalties is not None and len(self.penalties) < 2:
            return None
        return link_handicap(self.least_penalty, bandwidth)

    def group_handicaps(self, bandwidth: float, others_unseen: float) -> list[float]:
        """Per group, the points its nodes lose for a pod of ``bandwidth``:
        ``link_points``, and on the other replicas' nodes those of
        ``others_unseen`` bytes/s they may be steering there unseen."""
        assert self.penalties is not None
        least = self.least_penalty
        link = [link_points(penalty, least, bandwidth) for penalty in self.penalties]
        if not self.replica_grouped:
            return link
        return link + [
            points + penalty * others_unseen
            for points, penalty in zip(link, self.penalties, strict=True)
        ]

    def by_zone(
        self,
        zone_of: Mapping[str, str],
        view: Mapping[str, tuple[float, int]],
        declined: Mapping[str, float],
    ) -> CandidateHeap:
        """The heap grouped by zone, built when first needed."""
        if self.zoned is None:
            names = sorted(set(zone_of.values()))
            group = {zone: index for index, zone in enumerate(names, start=1)}
            layout = HeapLayout(
                self.layout.candidates, lambda score: group.get(zone_of.get(score.name, ""), 0)
            )
            self.zoned, self.zones = CandidateHeap(layout, view, declined), ("", *names)
        return self.zoned

    def update(self, node: str) -> None:
        """``node``'s unseen load changed, and no unlearned count: the
        shared heap, and the zoned one if any."""
        self.shared.update(node)
        if self.zoned is not None:
            self.zoned.update(node)

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
        """Ranked by ``view`` less the ``declined`` points, grouped by the
        replica share ``grouped_by`` (place, replicas), an own heap for each
        workload of ``in_flight``. Reads nothing else: it may run beside the admissions."""
        candidates = snapshot.candidates
        distinct = sorted({score.penalty_per_byte for score in candidates})
        penalties = distinct if len(distinct) < MOST_GROUPS else None
        share = None
        if grouped_by is not None:
            blocks = NodeBlocks.over(snapshot.nodes, grouped_by[1], blocks)
            share = ReplicaShare(grouped_by[0], blocks)
        replica_grouped = share is not None and penalties is not None
        group_of: Callable[[NodeScore], int] | None = None
        if penalties is not None and (replica_grouped or len(penalties) > 1):
            group = {penalty: index for index, penalty in enumerate(penalties)}
            others = len(penalties)

            def group_of(score: NodeScore) -> int:
                index = group[score.penalty_per_byte]
                return index if share is None or share.owns(score.name) else others + index

        layout = HeapLayout(candidates, group_of)
        own = OrderedDict((w, own_heap(layout, view, p, declined)) for w, p in in_flight.items())
        return cls(
            CandidateHeap(layout, view, declined),
            own,
            layout,
            penalties,
            distinct[0] if distinct else 0.0,
            replica_grouped,
            blocks,
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
        zoned = () if self.zoned is None else (self.zoned,)
        for heap in (self.shared, *zoned, *self.own.values()):
            heap.update(node, points)
