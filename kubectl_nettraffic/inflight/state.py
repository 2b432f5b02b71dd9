"""InflightState: the bookings store behind one lock, and the candidate heaps that rank by it.

Everything that reads or changes the bookings (bookings.py) goes through
here, under one lock:

- ``admission``: one admission is a transaction: ``with
  inflight.admission(snapshot) as admission:`` chooses nodes, takes a key
  and books, every booking before it counted (and the other replicas'
  nodes and its unlearned workload's pods against the choice);
- ``adopt``: a new snapshot is published. The walk of the bookings to its
  measurement time and its heaps are worked out beside the admissions,
  which wait only while they are put in place; the binding watch's moves
  and drops wait for it (a Condition on the one lock);
- ``book_seen``, ``rebook``, ``release``, ``shown``: the binding watch
  (bindings.py) books another replica's pod, moves a booking to the node
  its pod was bound to, drops one whose pod will not run, and times the
  watch on this replica's own pods;
- ``view``: readers (/scores, the extender) get a copy of the unseen load.

The candidate heaps (candidates.py) are views of the bookings kept current
as bookings are added, moved and dropped, so that a choice reads a few
nodes whatever is in flight:

- the replica share lowers every node that is not this replica's by the
  same part of a pod, so the heap is split into groups (this replica's
  nodes, and the others' by penalty per byte) and the best of each group
  are read off its top;
- an unlearned workload with pods on many nodes gets a heap of its own,
  whose scores carry its pods' points; one with pods on a few nodes is read
  off the shared heap, as many nodes further as it has nodes.
"""

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.bookings import Bookings, CountChange, UnseenView, Walk
from kubectl_nettraffic.inflight.candidates import CandidateHeap, HeapLayout, Ranked
from kubectl_nettraffic.inflight.declined_nodes import declined_handicap
from kubectl_nettraffic.inflight.replica_share import NodeBlocks, Replicas, ReplicaShare
from kubectl_nettraffic.inflight.unlearned import POINTS_PER_POD, unlearned_handicap
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

# An unlearned workload gets a heap of its own once its pods in flight are
# on this many nodes: below it, reading that many nodes more off the shared
# heap costs less than keeping one more heap current.
OWN_HEAP_FROM = 8
# At most this many such heaps are kept (the workloads chosen for last);
# each booking updates every one of them.
MOST_OWN_HEAPS = 8
# Groups of the replica share: this replica's nodes, and the others' by
# each distinct penalty per byte (one per NIC speed, in practice). With more
# distinct penalties than this the heap is not split, and a choice walks it
# (scoring/placement.py, handicapped_top: exact, up to MOST_READ nodes).
MOST_GROUPS = 16


@dataclass
class _Heaps:
    """The candidate heaps of one snapshot: the shared one, and those of
    unlearned workloads (most recently chosen for last), all over
    ``layout``, whose groups after the first are of the penalties per byte
    ``penalties`` (None: too many to group by); the nodes' blocks among the
    replicas, ``blocks``."""

    shared: CandidateHeap
    own: OrderedDict[Workload, CandidateHeap]
    layout: HeapLayout
    penalties: list[float] | None
    blocks: NodeBlocks | None


def _build_heaps(
    snapshot: Snapshot,
    view: Mapping[str, tuple[float, int]],
    grouped_by: tuple[int, int] | None,
    in_flight: Mapping[Workload, Mapping[str, int]],
    declined: Mapping[str, float],
    blocks_before: NodeBlocks | None,
) -> _Heaps:
    """Heaps over the ``snapshot``'s candidates ranked by ``view`` less the
    points of the ``declined`` nodes, grouped by the replica share
    ``grouped_by`` (place, replicas), one for each workload of ``in_flight``
    (its pods in flight per node). Reads nothing else: it may run beside
    the admissions."""
    candidates = snapshot.candidates
    group_of: Callable[[NodeScore], int] | None = None
    penalties: list[float] | None = []
    blocks: NodeBlocks | None = None
    if grouped_by is not None:
        distinct = sorted({score.penalty_per_byte for score in candidates})
        penalties = distinct if len(distinct) < MOST_GROUPS else None
        blocks = NodeBlocks.over(snapshot.nodes, grouped_by[1], blocks_before)
        if penalties is not None:
            share = ReplicaShare(grouped_by[0], blocks)
            group = {penalty: 1 + index for index, penalty in enumerate(penalties)}

            def group_of(score: NodeScore) -> int:
                return 0 if share.owns(score.name) else group[score.penalty_per_byte]

    layout = HeapLayout(candidates, group_of)  # the shared heap and the own heaps read one layout
    own = OrderedDict(
        (workload, _build_own_heap(layout, view, pods, declined))
        for workload, pods in in_flight.items()
    )
    return _Heaps(CandidateHeap(layout, view, declined), own, layout, penalties, blocks)


def _build_own_heap(
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


class Admission:
    """One admission's transaction, holding the in-flight lock throughout:
    ``snapshot`` is the one it decides by (the one given, or a newer one
    the in-flight state follows)."""

    __slots__ = ("_state", "snapshot")

    def __init__(self, state: "InflightState", snapshot: Snapshot) -> None:
        self._state, self.snapshot = state, snapshot

    def __enter__(self) -> "Admission":
        state = self._state
        state._lock.acquire()
        try:
            state._follow(self.snapshot)
        except BaseException:
            state._lock.release()
            raise
        assert state._snapshot is not None
        self.snapshot = state._snapshot
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._state._lock.release()

    def choose(
        self,
        pod: Pod,
        selector: LabelSelector,
        count: int,
        bandwidth: float,
        now: float,
        unlearned: Workload | None = None,
    ) -> list[Preference]:
        """The best ``count`` nodes for ``pod`` (booked at ``bandwidth``;
        ``unlearned``: its workload, when booked at the default)."""
        return self._state._choose(pod, selector, count, bandwidth, now, unlearned)

    def new_key(self) -> int:
        """A key for a booking, unique in this process."""
        return next(self._state._keys)

    def book(
        self, node: str, bandwidth: float, at: float, key: int, unlearned: Workload | None = None
    ) -> None:
        """Book this replica's own admission on ``node``."""
        state = self._state
        state._replicas.admitted(at)
        state._book(node, bandwidth, at, key, state.replica or "", unlearned)


class InflightState:
    """``replica``: this process's id among the replicas (its steered-by
    label); None when it follows no bindings and so sees no other replica."""

    def __init__(
        self,
        settings: Settings,
        replica: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.replica = replica
        self._clock = clock
        self._bookings = Bookings(
            settings.steering.pod_startup, settings.prometheus.window, replica or ""
        )
        # A pod's traffic is fully in the measurements this long after its admission.
        horizon = settings.steering.pod_startup + settings.prometheus.window
        self._replicas = Replicas(replica, horizon)
        self._lock = threading.Lock()
        # An adopt walks the bookings beside the admissions (appends go on);
        # moves, drops and another walk wait for it.
        self._walked = threading.Condition(self._lock)
        self._walking = False
        # While it walks: the unlearned counts changed meanwhile, to replay.
        self._journal: list[CountChange] | None = None
        self._keys = itertools.count(1)
        self._snapshot: Snapshot | None = None  # adopted
        self._heaps: _Heaps | None = None
        self._grouped_by: tuple[int, int] | None = None  # the heaps' (place, replicas)

    # -- snapshots ---------------------------------------------------------

    @property
    def adopted(self) -> Snapshot | None:
        return self._snapshot

    def adopt(self, snapshot: Snapshot) -> None:
        """Follow a newly published snapshot: the walk to its measurement
        time and its heaps are worked out beside the admissions, which wait
        only while they are put in place."""
        bookings = self._bookings
        with self._lock:
            if not self._is_new(snapshot):
                return
            while self._walking:
                self._walked.wait()
            edge = bookings.edge_of(snapshot.generated_at)
            if not bookings.is_newer(edge) or self._heaps is None:
                self._follow(snapshot)
                return
            start, grouped_by, blocks = bookings.start(), self._grouped_by, self._heaps.blocks
            in_flight = {w: dict(bookings.unlearned.get(w, {})) for w in self._heaps.own}
            self._walking, self._journal = True, []
        try:
            walked = bookings.walk(edge, start)
            heaps = _build_heaps(snapshot, walked.view, grouped_by, in_flight, {}, blocks)
        except BaseException:  # a bug: the state stays as it was (Scoreboard.record)
            with self._lock:
                self._walking, self._journal = False, None
                self._walked.notify_all()
            raise
        with self._lock:
            self._walking, journal, self._journal = False, self._journal or [], None
            self._walked.notify_all()
            self._put(snapshot, walked, heaps, grouped_by, journal)

    def _is_new(self, snapshot: Snapshot) -> bool:
        current = self._snapshot
        # An older one is a reader's stale copy.
        return current is None or (
            snapshot is not current and snapshot.generated_at >= current.generated_at
        )

    def _put(
        self,
        snapshot: Snapshot,
        walked: Walk,
        heaps: _Heaps,
        grouped_by: tuple[int, int] | None,
        journal: list[CountChange],
    ) -> None:
        """Inside the lock: the walked view and heaps become the live ones,
        brought up to date with what was booked and counted meanwhile; when
        the walk was void or the replica share changed, followed here instead."""
        if not self._is_new(snapshot):
            return
        committed = None if grouped_by != self._grouped_by else self._bookings.commit(walked)
        if committed is None:
            self._follow(snapshot)
            return
        touched, forgotten = committed
        self._snapshot, self._heaps = snapshot, heaps
        self._unseen_changed(touched, ())
        self._counts_changed(journal)
        self._counts_changed(forgotten)

    def _follow(self, snapshot: Snapshot) -> None:
        """Inside the lock: follow ``snapshot`` if it is new, walking here."""
        if not self._is_new(snapshot):
            return
        while self._walking:  # rare: an admission found a snapshot newer than the adopted one
            self._walked.wait()
        self._bookings.measure(snapshot.generated_at)
        self._snapshot = snapshot
        self._rebuild()

    def _rebuild(self) -> None:
        assert self._snapshot is not None
        bookings = self._bookings
        self._heaps = _build_heaps(
            self._snapshot,
            bookings.view,
            self._grouped_by,
            {},
            bookings.declined,
            None if self._heaps is None else self._heaps.blocks,
        )

    def view(self) -> UnseenView:
        """node -> (bytes/s not visible in the adopted snapshot yet, pods): a copy."""
        with self._lock:
            return dict(self._bookings.view)

    # -- one admission -----------------------------------------------------

    def admission(self, snapshot: Snapshot) -> Admission:
        """``with inflight.admission(snapshot) as admission:`` one admission's
        choice and booking, under the lock, by ``admission.snapshot``."""
        return Admission(self, snapshot)

    def _choose(
        self,
        pod: Pod,
        selector: LabelSelector,
        count: int,
        bandwidth: float,
        now: float,
        unlearned: Workload | None,
    ) -> list[Preference]:
        snapshot, bookings = self._snapshot, self._bookings
        assert snapshot is not None
        grouped_by = self._replicas.advance(now)
        if grouped_by != self._grouped_by or self._heaps is None:
            self._grouped_by = grouped_by
            self._rebuild()
        heaps = self._heaps
        assert heaps is not None
        share = None
        if grouped_by is not None:
            assert heaps.blocks is not None
            share = ReplicaShare(grouped_by[0], heaps.blocks, self._replicas.concurrent())
        unlearned_points = (
            None if unlearned is None else unlearned_handicap(bookings.unlearned.get(unlearned))
        )
        top: Callable[[int], list[Ranked]] = heaps.shared.top  # the usual pod: no handicap
        # For nodes read one by one (constrained pods, tainted nodes); the
        # heaps carry the declined nodes' points already.
        handicap = declined_handicap(bookings.declined)
        if share is not None or unlearned_points is not None:
            share_points = None if share is None else share.handicap(bandwidth)
            handicap = combined(share_points, unlearned_points, handicap)
            top = self._top_under(share, share_points, bandwidth, unlearned, unlearned_points)
        return choose_nodes(
            snapshot.candidates,
            snapshot.tainted,
            snapshot.nodes,
            pod,
            selector,
            bookings.view,
            count,
            top,
            handicap,
        )

    def _top_under(
        self,
        share: ReplicaShare | None,
        share_points: Handicap | None,
        bandwidth: float,
        unlearned: Workload | None,
        unlearned_points: Handicap | None,
    ) -> Callable[[int], list[Ranked]]:
        """The best N by live score less the handicaps, off the heaps that
        keep them where there are such heaps."""
        heaps = self._heaps
        assert heaps is not None

        def top(wanted: int) -> list[Ranked]:
            heap, rest, exposed = heaps.shared, unlearned_points, 0
            if unlearned is not None and unlearned_points is not None:
                in_flight = self._bookings.unlearned.get(unlearned) or {}
                if len(in_flight) >= OWN_HEAP_FROM:
                    heap, rest = self._own_heap(unlearned, in_flight), None
                else:
                    exposed = len(in_flight)
            if share is None:
                if rest is None:
                    return heap.top(wanted)
                return heap.top_grouped(wanted, [0.0], rest, exposed)
            if heaps.penalties is None:
                every = combined(share_points, rest)
                assert every is not None
                return handicapped_top(heap, wanted, every)
            unseen = bandwidth * share.concurrent
            handicaps = [0.0, *(penalty * unseen for penalty in heaps.penalties)]
            return heap.top_grouped(wanted, handicaps, rest, exposed)

        return top

    # -- the binding watch -------------------------------------------------

    def is_pending(self, key: int) -> bool:
        """Whether the booking ``key`` may still move or drop (a lock-free hint)."""
        return self._bookings.is_pending(key)

    def book_seen(
        self,
        node: str,
        bandwidth: float,
        at: float,
        replica: str,
        unlearned: Workload | None = None,
    ) -> int:
        """Book a pod this process did not admit (``replica`` steered it:
        another one, or this one before a restart), seen in the watch;
        returns the booking's key here, for ``rebook`` and ``release``."""
        with self._lock:
            self._replicas.saw(replica, at)
            key = next(self._keys)
            self._book(node, bandwidth, at, key, replica, unlearned)
            return key

    def shown(self, key: int, at: float) -> None:
        """The binding watch showed, at ``at``, this process's pod booked as ``key``."""
        with self._lock:
            self._bookings.shown(key, at)

    @property
    def watch_delay(self) -> float:
        """Seconds this replica's watch takes to show a pod, as measured
        (exported; a long one means replicas see each other late)."""
        with self._lock:
            self._bookings.time_unshown(self._clock())
            return self._bookings.watch_delay

    @property
    def declined_total(self) -> int:
        """Nodes declined so far, each once per snapshot (declined_nodes.py)."""
        with self._lock:
            return self._bookings.declined_total

    def rebook(self, key: int, node: str) -> str | None:
        """The pod booked as ``key`` was bound to ``node``: its booking moves
        there, once. "moved", "kept" (it was booked there), or None when
        there was nothing to move."""
        with self._lock:
            while self._walking:
                self._walked.wait()
            moved = self._bookings.move(key, node)
            if moved is None:
                return None
            if moved.left == node:
                return "kept"
            self._unseen_changed((moved.left, node), moved.counts)
            if moved.declined and self._heaps is not None:
                for heap in (self._heaps.shared, *self._heaps.own.values()):
                    heap.update(moved.left, moved.declined)
            return "moved"

    def release(self, key: int) -> bool:
        """The pod booked as ``key`` will not run (deleted or failed unbound):
        its booking is dropped. False when there was nothing to drop."""
        with self._lock:
            while self._walking:
                self._walked.wait()
            dropped = self._bookings.drop(key)
            if dropped is None:
                return False
            self._unseen_changed((dropped[0],), dropped[1])
            return True

    # -- keeping the heaps current -----------------------------------------

    def _book(
        self,
        node: str,
        bandwidth: float,
        at: float,
        key: int,
        replica: str,
        unlearned: Workload | None,
    ) -> None:
        counted = self._bookings.add(node, bandwidth, at, key, replica, unlearned)
        heaps = self._heaps
        if counted is None and (heaps is None or not heaps.own):
            if heaps is not None:
                heaps.shared.update(node)  # the usual booking: one heap, one node
            return
        self._unseen_changed((node,), () if counted is None else (counted,))

    def _unseen_changed(self, nodes: Iterable[str], counted: Iterable[CountChange]) -> None:
        """The unseen load of ``nodes`` changed, and the unlearned counts as
        ``counted`` says: re-rank them."""
        counted = list(counted)
        if self._journal is not None:
            self._journal.extend(counted)
        heaps = self._heaps
        if heaps is None:
            return  # nothing adopted yet: the first heap is built from the bookings
        points = {(workload, node): POINTS_PER_POD * pods for workload, node, pods in counted}
        for node in nodes:
            heaps.shared.update(node)
            for workload, heap in heaps.own.items():
                heap.update(node, points.get((workload, node), 0.0))
        self._drop_settled({workload for workload, _ in points})

    def _counts_changed(self, counted: Iterable[CountChange]) -> None:
        """Only unlearned counts changed."""
        heaps = self._heaps
        assert heaps is not None
        workloads = set()
        for workload, node, pods in counted:
            heap = heaps.own.get(workload)
            if heap is not None:
                heap.update(node, POINTS_PER_POD * pods)
                workloads.add(workload)
        self._drop_settled(workloads)

    def _drop_settled(self, workloads: Iterable[Workload]) -> None:
        """Own heaps of workloads with no pod in flight any more go."""
        heaps = self._heaps
        assert heaps is not None
        for workload in workloads:
            if workload in heaps.own and workload not in self._bookings.unlearned:
                del heaps.own[workload]

    def _own_heap(self, workload: Workload, in_flight: Mapping[str, int]) -> CandidateHeap:
        heaps = self._heaps
        assert heaps is not None
        heap = heaps.own.get(workload)
        if heap is not None:
            heaps.own.move_to_end(workload)
            return heap
        heap = _build_own_heap(
            heaps.layout, self._bookings.view, in_flight, self._bookings.declined
        )
        heaps.own[workload] = heap
        if len(heaps.own) > MOST_OWN_HEAPS:
            heaps.own.popitem(last=False)
        return heap
