"""InflightState: the bookings store (bookings.py) and the candidate heaps
(candidates.py) kept current by it, behind one lock. Every reader and
writer of bookings goes through here: ``with inflight.admission(snapshot)
as admission:`` (one admission's choice and booking); ``adopt`` (a new
snapshot: its walk and heaps worked out beside the admissions, the binding
watch's moves and drops waiting); ``book_seen``, ``rebook``, ``release``
and ``shown`` (the binding watch, kube/binding_watch.py); ``view`` (a copy
for /scores and the extender).
"""

import itertools
import threading
import time
from collections.abc import Callable, Iterable

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.bookings import Bookings, CountChange, UnseenView
from kubectl_nettraffic.inflight.candidates import Heaps, Ranked, ZonePull, pulled_top
from kubectl_nettraffic.inflight.handicaps import (
    declined_handicap,
    unlearned_handicap,
)
from kubectl_nettraffic.inflight.replica_share import Replicas, ReplicaShare
from kubectl_nettraffic.kube.pods import Pod
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.placement import (
    Preference,
    choose_nodes,
    combined,
    handicapped_top,
    lowered_by,
)

# An unlearned workload gets a heap of its own once its pods in flight are
# on this many nodes: below it, reading that many nodes more off the shared
# heap costs less than keeping one more heap current.
OWN_HEAP_FROM = 8


class Admission:
    """One admission, holding the in-flight lock throughout; ``snapshot`` is
    the one it decides by (the one given, or a newer one already followed)."""

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

    def __exit__(self, *_: object) -> None:
        self._state._lock.release()

    @property
    def unseen(self) -> UnseenView:
        """node -> (bytes/s booked that no measurement shows yet, pods): the
        live view, read within this admission only."""
        return self._state._bookings.view

    def choose(
        self,
        pod: Pod,
        selector: LabelSelector,
        count: int,
        bandwidth: float,
        now: float,
        unlearned: Workload | None = None,
        pull: ZonePull | None = None,
    ) -> list[Preference]:
        """The best ``count`` nodes for ``pod`` (booked at ``bandwidth``;
        ``unlearned``: its workload, when booked at the default; ``pull``:
        the points its peers add to some nodes)."""
        state, snapshot = self._state, self.snapshot
        bookings, replicas = state._bookings, state._replicas
        grouped_by = replicas.advance(now)
        if grouped_by != state._grouped_by or state._heaps is None:
            state._grouped_by = grouped_by
            state._rebuild()
        heaps = state._heaps
        assert heaps is not None
        share = None
        if grouped_by is not None and heaps.blocks is not None:
            share = ReplicaShare(grouped_by[0], heaps.blocks, replicas.concurrent())
        pods = None if unlearned is None else bookings.unlearned.get(unlearned)
        rest = unlearned_handicap(pods)
        # A slower link fills more with this pod: the nodes rank as they
        # would score with it on them, as kube-scheduler scores a node with
        # the pod's requests added (docs/design/behaviour.md).
        link = heaps.link_handicap(bandwidth)
        share_points = None if share is None else share.handicap(bandwidth)
        top: Callable[[int], list[Ranked]] = heaps.shared.top  # the usual pod: no handicap
        # For nodes read one by one (constrained pods, tainted nodes); the
        # heaps carry the declined nodes' points already.
        handicap = declined_handicap(bookings.declined)
        lift = 0.0
        if pull is not None:
            # Peers raise scores, mostly a zone's alike: one pod's choice
            # reads the heap grouped by zone; with the replica share (a
            # grouping of its own) the shared heap is walked best first.
            lift = pull.most
            on_heap = combined(share_points, rest, link, lowered_by(pull))
            assert on_heap is not None
            handicap = combined(on_heap, handicap)
            if share is None:
                zoned = heaps.by_zone(pull.zone_of, bookings.view, bookings.declined)
                lowered = combined(rest, link)

                def top(wanted: int) -> list[Ranked]:
                    return pulled_top(zoned, heaps.zones, heaps.shared, wanted, pull, lowered)

            else:

                def top(wanted: int) -> list[Ranked]:
                    return handicapped_top(heaps.shared, wanted, on_heap, lift)

        elif share is not None or rest is not None or link is not None:
            handicap = combined(share_points, rest, link, handicap)

            def top(wanted: int) -> list[Ranked]:
                heap, points, exposed = heaps.shared, rest, 0
                if pods and unlearned is not None:
                    if len(pods) >= OWN_HEAP_FROM:
                        declined = bookings.declined
                        heap, points = heaps.own_for(unlearned, pods, bookings.view, declined), None
                    else:
                        exposed = len(pods)  # its nodes may be that many further down
                if heaps.penalties is None:  # too many link speeds to group by
                    every = combined(share_points, points, link)
                    assert every is not None
                    return handicapped_top(heap, wanted, every)
                if points is None and heap.groups == 1:
                    # One group: the fastest links', this replica's own; no handicap.
                    return heap.top(wanted)
                others = 0.0 if share is None else bandwidth * share.concurrent
                handicaps = heaps.group_handicaps(bandwidth, others)
                return heap.top_grouped(wanted, handicaps, points, exposed)

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
            lift,
        )

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
        startup, window = settings.steering.pod_startup, settings.prometheus.window
        self._bookings = Bookings(startup, window, replica or "")
        # A pod's traffic is fully in the measurements this long after its admission.
        self._replicas = Replicas(replica, startup + window)
        self._lock = threading.Lock()
        # An adopt walks the bookings beside the admissions; moves, drops and
        # another walk wait for it on this Condition of the one lock.
        self._walked = threading.Condition(self._lock)
        self._walking = False
        self._journal: list[CountChange] | None = None  # counts changed while it walks
        self._keys = itertools.count(1)
        self._snapshot: Snapshot | None = None  # adopted
        self._heaps: Heaps | None = None
        self._grouped_by: tuple[int, int] | None = None  # the heaps' (place, replicas)

    @property
    def adopted(self) -> Snapshot | None:
        return self._snapshot

    def admission(self, snapshot: Snapshot) -> Admission:
        """``with inflight.admission(snapshot) as admission:`` one admission's
        choice and booking, under the lock, by ``admission.snapshot``."""
        return Admission(self, snapshot)

    def view(self) -> UnseenView:
        """node -> (bytes/s not visible in the adopted snapshot yet, pods): a copy."""
        with self._lock:
            return dict(self._bookings.view)

    # -- snapshots ---------------------------------------------------------

    def adopt(self, snapshot: Snapshot) -> None:
        """Follow a newly published snapshot. An exception (a bug) leaves the
        state as it was (Scoreboard.record keeps the previous snapshot)."""
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
            heaps = Heaps.build(snapshot, walked.view, grouped_by, in_flight, {}, blocks)
        except BaseException:
            with self._lock:
                self._walking, self._journal = False, None
                self._walked.notify_all()
            raise
        with self._lock:
            self._walking, journal, self._journal = False, self._journal or [], None
            self._walked.notify_all()
            if not self._is_new(snapshot):
                return
            # In place with what was booked meanwhile; walked again here when
            # the walk was void or the replica share changed meanwhile.
            committed = None if grouped_by != self._grouped_by else bookings.commit(walked)
            if committed is None:
                self._follow(snapshot)
                return
            touched, forgotten = committed
            self._snapshot, self._heaps = snapshot, heaps
            self._rerank(touched, ())
            self._rerank((), journal + forgotten)

    def _is_new(self, snapshot: Snapshot) -> bool:
        current = self._snapshot
        # An older one is a reader's stale copy.
        return current is None or (
            snapshot is not current and snapshot.generated_at >= current.generated_at
        )

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
        bookings, blocks = self._bookings, None if self._heaps is None else self._heaps.blocks
        self._heaps = Heaps.build(
            self._snapshot, bookings.view, self._grouped_by, {}, bookings.declined, blocks
        )

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
        """Nodes declined so far, each once per snapshot (handicaps.py)."""
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
            self._rerank((moved.left, node), moved.counts)
            if moved.declined and self._heaps is not None:
                self._heaps.decline(moved.left, moved.declined)
            return "moved"

    def release(self, key: int) -> bool:
        """The pod booked as ``key`` will not run (deleted or failed unbound):
        its booking is dropped. False when there was nothing to drop."""
        with self._lock:
            while self._walking:
                self._walked.wait()
            dropped = self._bookings.drop(key)
            if dropped is not None:
                self._rerank((dropped[0],), dropped[1])
            return dropped is not None

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
        if counted is None and heaps is not None and not heaps.own:
            heaps.update(node)  # the usual booking: one heap (two with peers), one node
        else:
            self._rerank((node,), () if counted is None else (counted,))

    def _rerank(self, nodes: Iterable[str], counted: Iterable[CountChange]) -> None:
        counted = list(counted)
        if self._journal is not None:
            self._journal.extend(counted)
        if self._heaps is not None:  # else the first heaps are built from the store
            self._heaps.rerank(nodes, counted, self._bookings.unlearned)
