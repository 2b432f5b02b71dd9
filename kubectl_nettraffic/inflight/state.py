"""Pods steered but not yet visible in a measurement: their one owner.

Live in-flight state is the in-flight ledger (ledger.py: what each node
carries that no measurement shows yet, the one keeper of that figure), the
candidate heaps that rank the nodes by it (candidates.py), the booking
keys, the replicas seen steering (replica_share.py), the pods of workloads
booked at the default (unknown_workloads.py), the nodes kube-scheduler
declined since the adopted snapshot (declined_nodes.py), and the lock over
all of them. Everything that reads or changes it goes through InflightState:

- ``adopt``: a new snapshot is published; the ledger moves to its
  measurement time and the heaps are rebuilt from its candidates. That
  work (a refresh's worth of bookings walked, heaps over every node) is
  done beside the admissions, which wait only while it is put in place
  and the bookings they made meanwhile are added to it;
- ``lock`` ... ``choose``, ``new_key``, ``book`` ... ``unlock``: one
  admission chooses its nodes and books its pod holding the lock
  throughout, so concurrent admissions see each other's bookings (and the
  other replicas' nodes and its workload's pods booked at the default
  count against the choice);
- ``book_seen``: the binding watch (bindings.py) books a pod another
  replica steered, and so learns which replicas steer (replica_share.py);
- ``shown``: the binding watch shows this process's pod, which times the
  watch's delay (replica_share.py);
- ``rebook`` / ``release``: the binding watch moves a booking to the node
  its pod was bound to (the node it leaves declined the pod), or drops it
  for a pod that will not run (waiting for an adopt under way, whose walk
  they would void);
- ``view``: readers (/scores, the extender) get the ledger's figures. It
  changes nothing.

What a choice reads is kept current as bookings are added, moved and
dropped, so that it reads a few nodes whatever is in flight:

- the replica share lowers every node that is not this replica's by the
  same part of a pod, so the candidate heap is split into groups (this
  replica's nodes, and the others' by penalty per byte) and the best of
  each group are read off its top;
- a workload not learned yet with pods on many nodes gets a heap of its
  own, whose scores carry its pods' points; one with pods on a few nodes
  is read off the shared heap, as many nodes further as it has nodes.
"""

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.candidates import CandidateHeap, HeapLayout, Ranked
from kubectl_nettraffic.inflight.declined_nodes import DeclinedNodes
from kubectl_nettraffic.inflight.ledger import InflightLedger, NextView
from kubectl_nettraffic.inflight.replica_share import NodeParts, Replicas, ReplicaShare
from kubectl_nettraffic.inflight.unknown_workloads import (
    POINTS_PER_POD,
    CountChange,
    UnknownWorkloadPods,
)
from kubectl_nettraffic.kube.pods import Pod
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import (
    Handicap,
    Preference,
    choose_nodes,
    combined,
    handicapped_top,
)

# A workload not learned yet gets a heap of its own once its pods in flight
# are on this many nodes: below it, reading that many nodes more off the
# shared heap costs less than keeping one more heap current.
OWN_HEAP_FROM = 8
# At most this many such heaps are kept (the workloads chosen for last);
# each booking updates every one of them.
MOST_OWN_HEAPS = 8
# Groups of the replica share: this replica's nodes, and the others' by
# each distinct penalty per byte (one per NIC speed, in practice). With more
# distinct penalties than this the heap is not split, and a choice walks it
# (scoring/placement.py, handicapped_top: exact, up to MOST_READ nodes).
MOST_GROUPS = 16


GroupOf = Callable[[NodeScore], int]


@dataclass
class _Heaps:
    """The candidate heaps of one snapshot: the shared one, and those of
    workloads not learned yet (most recently chosen for last), all over
    ``layout``, whose groups after the first are of the penalties per byte
    ``penalties``; the nodes' parts among the replicas, ``lines``."""

    shared: CandidateHeap
    own: OrderedDict[Workload, CandidateHeap]
    layout: HeapLayout
    penalties: list[float] | None
    lines: NodeParts | None


def _build_heaps(
    snapshot: Snapshot,
    view: Mapping[str, tuple[float, int]],
    grouped_by: tuple[int, int] | None,
    in_flight: Mapping[Workload, Mapping[str, int]],
    declined: Mapping[str, float],
    lines_before: NodeParts | None,
) -> _Heaps:
    """Heaps over the ``snapshot``'s candidates ranked by ``view`` less the
    points of the ``declined`` nodes, grouped by the replica share
    ``grouped_by`` over the nodes it lists (``lines_before``, the lines of
    the heaps before, kept if they are drawn over the same nodes), one of
    them for each workload of ``in_flight`` (its pods in flight per node).
    Reads nothing else: it may run beside the admissions, against a view
    they do not book into yet."""
    candidates = snapshot.candidates
    group_of: GroupOf | None = None
    penalties: list[float] | None = []
    lines: NodeParts | None = None
    if grouped_by is not None:
        distinct = sorted({score.penalty_per_byte for score in candidates})
        penalties = distinct if len(distinct) < MOST_GROUPS else None
        lines = NodeParts.over(snapshot.nodes, grouped_by[1], lines_before)
    if grouped_by is not None and penalties is not None:
        owner = ReplicaShare(*grouped_by, lines=lines)
        group = {penalty: 1 + index for index, penalty in enumerate(penalties)}

        def group_of(score: NodeScore) -> int:
            return 0 if owner.owns(score.name) else group[score.penalty_per_byte]

    # The shared heap and the own heaps read one layout.
    layout = HeapLayout(candidates, group_of)
    own = OrderedDict(
        (workload, _build_own_heap(layout, view, pods, declined))
        for workload, pods in in_flight.items()
    )
    shared = CandidateHeap(layout, view, declined)
    return _Heaps(shared, own, layout, penalties, lines)


def _build_own_heap(
    layout: HeapLayout,
    view: Mapping[str, tuple[float, int]],
    pods: Mapping[str, int],
    declined: Mapping[str, float],
) -> CandidateHeap:
    """A workload's own heap: its ``pods`` in flight per node count against
    their nodes, as the ``declined`` nodes' points do."""
    points = dict(declined)
    for node, count in pods.items():
        points[node] = points.get(node, 0.0) + POINTS_PER_POD * count
    return CandidateHeap(layout, view, points)


class InflightState:
    """``replica``: this process's id among the replicas (its steered-by
    label); None when it follows no bindings and so sees no other replica."""

    def __init__(self, settings: Settings, replica: str | None = None) -> None:
        self.replica = replica
        self._ledger = InflightLedger(settings.steering.pod_startup, settings.prometheus.window)
        # A pod's traffic is fully in the measurements this long after its creation.
        horizon = settings.steering.pod_startup + settings.prometheus.window
        self._replicas = Replicas(replica, horizon)
        self._unknown = UnknownWorkloadPods(horizon)
        self._declined = DeclinedNodes()
        self._lock = threading.Lock()
        # Held by an adopt throughout, and by rebook and release, whose moves
        # would void the ledger's walk under way; taken before _lock.
        self._adopting = threading.Lock()
        # While an adopt works beside the admissions: the changes of the counts
        # of workloads not learned yet since it copied them, to replay.
        self._journal: list[CountChange] | None = None
        self._keys = itertools.count(1)
        # Of the adopted snapshot: the ledger's live view at its measurement
        # time (bookings update it in place until the next one) and the heaps.
        self._snapshot: Snapshot | None = None
        self._view: Mapping[str, tuple[float, int]] = {}
        self._heap: CandidateHeap | None = None
        self._own_heaps: OrderedDict[Workload, CandidateHeap] = OrderedDict()
        # The replica share the heaps are grouped by ((part, parts), or None:
        # one group), and the penalty per byte of each group after the first
        # (None: too many to group by).
        self._grouped_by: tuple[int, int] | None = None
        self._penalties: list[float] | None = []
        self._layout: HeapLayout | None = None
        self._lines: NodeParts | None = None  # the nodes' parts among the replicas

    # -- snapshots ---------------------------------------------------------

    def adopt(self, snapshot: Snapshot) -> None:
        """Follow a newly published snapshot: the ledger's walk to its
        measurement time and its heaps are worked out beside the admissions,
        which wait only while they are put in place."""
        with self._adopting:
            with self._lock:
                if not self._is_new(snapshot):
                    return
                grouped_by, lines = self._grouped_by, self._lines
                in_flight = {w: dict(self._unknown.in_flight(w)) for w in self._own_heaps}
                self._journal = []
            prepared: NextView | None = None
            heaps: _Heaps | None = None
            try:
                prepared = self._ledger.prepare(snapshot.generated_at)
                if prepared is not None:
                    heaps = _build_heaps(snapshot, prepared.view, grouped_by, in_flight, {}, lines)
            finally:
                with self._lock:
                    journal, self._journal = self._journal, None
                    if prepared is not None:
                        self._put(snapshot, prepared, heaps, grouped_by, journal)
                    self._adopt(snapshot)  # nothing prepared, or it was void

    def _is_new(self, snapshot: Snapshot) -> bool:
        current = self._snapshot
        # An older one is a reader's stale copy.
        return current is None or (
            snapshot is not current and snapshot.generated_at >= current.generated_at
        )

    def _put(
        self,
        snapshot: Snapshot,
        prepared: NextView,
        heaps: _Heaps | None,
        grouped_by: tuple[int, int] | None,
        journal: list[CountChange],
    ) -> None:
        """Inside ``lock``: the prepared view and heaps become the live ones,
        brought up to date with what was booked and counted meanwhile. Left
        as it was when the ledger's walk was void, a newer snapshot was
        adopted meanwhile, or the replica share changed (``_adopt`` then
        does it all here)."""
        touched = self._ledger.commit(prepared)
        if touched is None or heaps is None or not self._is_new(snapshot):
            return
        if grouped_by != self._grouped_by:
            return
        self._snapshot, self._view = snapshot, prepared.view
        self._declined.clear()  # the heaps were built without them
        self._heap, self._own_heaps = heaps.shared, heaps.own
        self._layout, self._penalties, self._lines = heaps.layout, heaps.penalties, heaps.lines
        self._unseen_changed(touched, ())
        self._counts_changed(journal)

    def _adopt(self, snapshot: Snapshot) -> None:
        if not self._is_new(snapshot):
            return
        self._view = self._ledger.view(snapshot.generated_at)
        self._snapshot = snapshot
        self._declined.clear()
        self._rebuild()

    def _rebuild(self) -> None:
        assert self._snapshot is not None
        heaps = _build_heaps(
            self._snapshot,
            self._view,
            self._grouped_by,
            {},
            self._declined.points,
            self._lines,
        )
        self._heap, self._own_heaps = heaps.shared, heaps.own
        self._layout, self._penalties, self._lines = heaps.layout, heaps.penalties, heaps.lines

    @property
    def adopted(self) -> Snapshot | None:
        return self._snapshot

    def view(self) -> Mapping[str, tuple[float, int]]:
        """node -> (bytes/s not visible in the adopted snapshot yet, pods).
        Live and shared: look values up, do not change them."""
        with self._lock:
            return self._view

    # -- one admission -----------------------------------------------------

    def lock(self, snapshot: Snapshot) -> Snapshot:
        """Take the lock for one admission, with ``snapshot`` adopted unless
        a newer one is; returns the snapshot followed, which the admission
        decides by. Call ``unlock`` after, always (try/finally)."""
        self._lock.acquire()
        try:
            self._adopt(snapshot)
        except BaseException:
            self._lock.release()
            raise
        assert self._snapshot is not None
        return self._snapshot

    def unlock(self) -> None:
        self._lock.release()

    def choose(
        self,
        pod: Pod,
        selector: LabelSelector,
        count: int,
        bandwidth: float,
        now: float,
        unknown: Workload | None = None,
    ) -> list[Preference]:
        """Inside ``lock``: the best ``count`` nodes for ``pod`` (booked at
        ``bandwidth``), every booking so far counted, and those other
        replicas may be making; ``unknown``: its workload, when it is
        booked at the default."""
        snapshot = self._snapshot
        assert snapshot is not None and self._heap is not None
        self._replicas.advance(now)
        share = self._replicas.share()
        grouped_by = None if share is None else (share.part, share.parts)
        if grouped_by != self._grouped_by:
            self._grouped_by = grouped_by
            self._rebuild()
        if share is not None:
            share = share._replace(lines=self._lines)
        forgotten = self._unknown.forget(now)
        if forgotten:
            self._counts_changed(forgotten)
        unknown_handicap = None if unknown is None else self._unknown.handicap(unknown)
        top: Callable[[int], list[Ranked]] = self._heap.top  # the usual pod: no handicap
        # For nodes read one by one (constrained pods, tainted nodes); the
        # heaps carry the declined nodes' points already.
        handicap = self._declined.handicap()
        if share is not None or unknown_handicap is not None:
            share_handicap = None if share is None else share.handicap(bandwidth)
            handicap = combined(share_handicap, unknown_handicap, handicap)
            top = self._top_under(share, share_handicap, bandwidth, unknown, unknown_handicap)
        return choose_nodes(
            snapshot.candidates,
            snapshot.tainted,
            snapshot.nodes,
            pod,
            selector,
            self._view,
            count,
            top,
            handicap,
        )

    def _top_under(
        self,
        share: ReplicaShare | None,
        share_handicap: Handicap | None,
        bandwidth: float,
        unknown: Workload | None,
        unknown_handicap: Handicap | None,
    ) -> Callable[[int], list[Ranked]]:
        """The best N by live score less the handicaps, off the heaps that
        keep them where there are such heaps."""

        def top(wanted: int) -> list[Ranked]:
            heap, rest, exposed = self._heap, unknown_handicap, 0
            assert heap is not None
            if unknown is not None and unknown_handicap is not None:
                in_flight = self._unknown.in_flight(unknown)
                if len(in_flight) >= OWN_HEAP_FROM:
                    heap, rest = self._own_heap(unknown, in_flight), None
                else:
                    exposed = len(in_flight)
            if share is None:
                if rest is None:
                    return heap.top(wanted)
                return heap.top_grouped(wanted, [0.0], rest, exposed)
            if self._penalties is None:
                every = combined(share_handicap, rest)
                assert every is not None
                return handicapped_top(heap, wanted, every)
            unseen = bandwidth * share.unseen
            handicaps = [0.0, *(penalty * unseen for penalty in self._penalties)]
            return heap.top_grouped(wanted, handicaps, rest, exposed)

        return top

    def new_key(self) -> int:
        """Inside ``lock``: a key for a booking, unique in this process."""
        return next(self._keys)

    def book(
        self, node: str, bandwidth: float, at: float, key: int, unknown: Workload | None = None
    ) -> None:
        """Inside ``lock``: book this replica's own admission (its pace
        scales the share)."""
        self._replicas.admitted(key, at)
        self._book(node, bandwidth, at, key, unknown)

    # -- the binding watch -------------------------------------------------

    def is_pending(self, key: int) -> bool:
        """Whether the booking ``key`` may still move or drop (a lock-free hint)."""
        return self._ledger.is_pending(key)

    def shown(self, key: int, at: float) -> None:
        """The binding watch showed, at ``at``, this process's pod booked as
        ``key``: the watch's delay (exported; a long one means replicas see each
        other late)."""
        with self._lock:
            self._replicas.delay.shown(key, at)

    @property
    def watch_delay(self) -> float:
        """Seconds this replica's watch takes to show a pod, as measured."""
        with self._lock:
            return self._replicas.delay.seconds

    @property
    def declined_total(self) -> int:
        """Nodes declined so far, each once per snapshot (declined_nodes.py)."""
        with self._lock:
            return self._declined.total

    def rebook(self, key: int, node: str) -> str | None:
        """The pod booked as ``key`` was bound to ``node``: its booking moves
        there, once. "moved", "kept" (it was booked there), or None when
        there was nothing to move."""
        with self._adopting, self._lock:
            moved = self._ledger.move(key, node)
            if moved is None:
                return None
            left = moved[0]
            if left == node:
                self._unknown.move(key, node)  # settles its key
                return "kept"
            self._unseen_changed((left, node), self._unknown.move(key, node))
            self._decline(left)
            return "moved"

    def release(self, key: int) -> bool:
        """The pod booked as ``key`` will not run (deleted or failed unbound):
        its booking is dropped. False when there was nothing to drop."""
        with self._adopting, self._lock:
            dropped = self._ledger.drop(key)
            if dropped is None:
                return False
            self._unseen_changed((dropped[0],), self._unknown.drop(key))
            return True

    def book_seen(
        self, node: str, bandwidth: float, at: float, replica: str, unknown: Workload | None = None
    ) -> int:
        """Book a pod this process did not admit (``replica`` steered it:
        another one, or this one before a restart), seen in the watch;
        returns the booking's key here, for ``rebook`` and ``release``.
        ``unknown``: its workload, when it was booked at the default."""
        with self._lock:
            self._replicas.saw(replica, at)
            key = next(self._keys)
            self._book(node, bandwidth, at, key, unknown)
            return key

    def book_at(self, node: str, bandwidth: float, at: float, key: int = 0) -> None:
        """Book a pod admitted at ``at`` outside an admission (benchmarks
        that preload the ledger); admissions book through ``book``."""
        with self._lock:
            self._book(node, bandwidth, at, key)

    # -- keeping the heaps current -----------------------------------------

    def _book(
        self, node: str, bandwidth: float, at: float, key: int, unknown: Workload | None = None
    ) -> None:
        """``unknown``: the pod's workload, when it was booked at the default."""
        self._ledger.add(node, bandwidth, at, key)
        if unknown is None and not self._own_heaps:
            if self._heap is not None:
                self._heap.update(node)  # the usual booking: one heap, one node
            return
        counted = () if unknown is None else (self._unknown.add(unknown, node, at, key),)
        self._unseen_changed((node,), counted)

    def _unseen_changed(self, nodes: Iterable[str], counted: Iterable[CountChange]) -> None:
        """The ledger's figure of ``nodes`` changed, and the pods of
        workloads not learned yet as ``counted`` says: re-rank them."""
        counted = list(counted)
        if self._journal is not None:
            self._journal.extend(counted)
        if self._heap is None:
            return  # nothing adopted yet: the first heap is built from the ledger
        points = {(workload, node): POINTS_PER_POD * pods for workload, node, pods in counted}
        for node in nodes:
            self._heap.update(node)
            for workload, heap in self._own_heaps.items():
                heap.update(node, points.get((workload, node), 0.0))
        self._drop_settled({workload for workload, _ in points})

    def _decline(self, node: str) -> None:
        """A pod booked on ``node`` was bound elsewhere (declined_nodes.py)."""
        points = self._declined.decline(node)
        if not points or self._heap is None:
            return
        self._heap.update(node, points)
        for heap in self._own_heaps.values():
            heap.update(node, points)

    def _counts_changed(self, counted: Iterable[CountChange]) -> None:
        """Only the counts of workloads not learned yet changed."""
        workloads = set()
        for change in counted:
            if self._journal is not None:
                self._journal.append(change)
            workload, node, pods = change
            heap = self._own_heaps.get(workload)
            if heap is not None:
                heap.update(node, POINTS_PER_POD * pods)
                workloads.add(workload)
        self._drop_settled(workloads)

    def _drop_settled(self, workloads: Iterable[Workload]) -> None:
        """Own heaps of workloads with no pod in flight any more go."""
        for workload in workloads:
            if workload in self._own_heaps and not self._unknown.in_flight(workload):
                del self._own_heaps[workload]

    def _own_heap(self, workload: Workload, in_flight: Mapping[str, int]) -> CandidateHeap:
        heap = self._own_heaps.get(workload)
        if heap is not None:
            self._own_heaps.move_to_end(workload)
            return heap
        assert self._layout is not None
        heap = _build_own_heap(self._layout, self._view, in_flight, self._declined.points)
        self._own_heaps[workload] = heap
        if len(self._own_heaps) > MOST_OWN_HEAPS:
            self._own_heaps.popitem(last=False)
        return heap
