"""InflightState: the bookings store (bookings.py) and the candidate heaps
(candidates.py) kept current by it, behind one lock. Every reader and
writer of bookings goes through here: ``with inflight.admission(snapshot)
as admission:`` (one admission's choice and booking); ``adopt`` (a new
snapshot: its walk and heaps worked out beside the admissions, the binding
watch's moves and drops waiting); ``book_seen``, ``rebook``, ``release``
and ``shown`` (the binding watch, kube/binding_watch.py); ``view`` (a copy
for /scores and the extender).
"""

import functools
import itertools
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.bookings import Bookings, CountChange, UnseenView
from kubectl_nettraffic.inflight.placed import LivePlaces
from kubectl_nettraffic.kube.node_affinity import has_node_constraints, pod_fits
from kubectl_nettraffic.kube.nodes import ineligibility
from kubectl_nettraffic.kube.pods import Pod
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.ranking.candidates import Heaps, Ranked
from kubectl_nettraffic.ranking.node_points import NodePoints, Pull
from kubectl_nettraffic.ranking.replica_share import Replicas
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.savings import Crowded
from kubectl_nettraffic.scoring.spread import Spread, SpreadRules

# An unlearned workload gets a heap of its own once its pods in flight are
# on this many nodes: below it, reading that many nodes more off the shared
# heap costs less than keeping one more heap current.
OWN_HEAP_FROM = 8


class Choice(NamedTuple):
    """One admission's choice."""

    ranked: list[Ranked]  # (score for the pod, position, score), best first
    relaxed: bool  # the workload's spread left no node the pod fits: chosen without it
    full: frozenset[str]  # chosen nodes that hold as many of its pods as its spread lets them
    # The zones its spread kept the choice out of (none when relaxed): its
    # tier terms leave them out too.
    barred: frozenset[str] = frozenset()
    # Where a chosen node is full: the candidates kube-scheduler's own
    # spread passes over; their nodes are read (a pass over as many as the
    # workload has nodes) only where they could matter, under the lock.
    crowded: Crowded | None = None


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
        workload: Workload | None = None,
        unlearned: bool = False,
        pull: Pull | None = None,
        spread: SpreadRules | None = None,
        template: Workload | None = None,
    ) -> Choice:
        """The best ``count`` nodes for ``pod`` of ``workload`` (booked at
        ``bandwidth``; ``unlearned``: at the default; ``pull``: the points
        its peers add to some nodes; ``spread``: the skew its workload may
        take, over its steered pods that run or will, placed.py): one exact
        choice over the candidates by live score plus NodePoints, whatever
        the pod (``Choice``)."""
        state, snapshot = self._state, self.snapshot
        bookings, replicas = state._bookings, state._replicas
        grouped_by = replicas.advance(now)
        if grouped_by != state._grouped_by or state._heaps is None:
            state._grouped_by = grouped_by
            state._rebuild()
        heaps = state._heaps
        assert heaps is not None
        others = 0.0 if heaps.share is None else bandwidth * replicas.concurrent()
        pods = bookings.unlearned.get(workload) if unlearned and workload is not None else None
        heap = heaps.shared
        if pods and workload is not None and len(pods) >= OWN_HEAP_FROM:
            # Its pods in flight count in a heap of its own.
            heap, pods = heaps.own_for(workload, pods, bookings.view, bookings.declined), None
        kept = None
        if spread is not None and workload is not None:
            # Its template's pods alone where the spread counts those (``template``).
            placed = bookings.placed
            counts, group = (
                (placed.workloads, workload) if template is None else (placed.templates, template)
            )
            booked = (counts.per_node.get(group, {}), counts.per_zone.get(group, {}))
            fewest = counts.fewest(group, len(heaps.layout.candidates))
            keeps_zones = pull is None or pull.keeps_zones
            room = placed.skew_room(group)
            kept = Spread(spread, booked, heaps.zone_of, heaps.zones, fewest, keeps_zones, room)
        fits = pod_fits(pod) if has_node_constraints(pod) else None
        tolerations = (pod.get("spec") or {}).get("tolerations")
        barring = kept is not None and bool(kept.barred_zones)
        for spread_kept in (kept, None) if barring else (None,):
            points = NodePoints(
                heaps.groups,
                heaps.least_penalty,
                bandwidth,
                others,
                pods or None,
                pull,
                fits,
                snapshot.nodes,
                spread_kept,
            )
            ranked = heap.best(count, points)
            if tolerations and snapshot.tainted:
                ranked = self._with_tainted(ranked, count, points, selector, tolerations)
            if ranked:
                filled = kept.full if kept is not None else lambda _: False
                full = frozenset(s.name for _, _, s in ranked if filled(s.name))
                barred = spread_kept.barred_zones if spread_kept is not None else frozenset()
                crowded = None
                if full and kept is not None:
                    crowded = Crowded(
                        counts.holding_more(group, fewest),
                        functools.partial(self._crowded, kept, heaps),
                    )
                relaxed = barring and spread_kept is None
                return Choice(ranked, relaxed, full, barred, crowded)
        return Choice([], False, frozenset())

    @staticmethod
    def _crowded(kept: Spread, heaps: Heaps) -> tuple[NodeScore, ...]:
        """The candidates ``kept`` says hold more of the workload's pods than the fewest."""
        layout = heaps.layout
        positions = (layout.position.get(node) for node in kept.crowded())
        return tuple(layout.candidates[p] for p in positions if p is not None)

    def _with_tainted(
        self,
        ranked: list[Ranked],
        count: int,
        points: NodePoints,
        selector: LabelSelector,
        tolerations: list[dict[str, Any]],
    ) -> list[Ranked]:
        """``ranked`` and the nodes blocked only by taints the pod
        tolerates (usually few), the best ``count``."""
        state, snapshot = self._state, self.snapshot
        heaps, view, declined = state._heaps, state._bookings.view, state._bookings.declined
        assert heaps is not None
        entries = [(effective, -position, score) for effective, position, score in ranked]
        for position, score in enumerate(snapshot.tainted, start=len(snapshot.candidates)):
            node = snapshot.nodes.get(score.name)
            if node is None or ineligibility(node, selector, tolerations) is not None:
                continue
            owned = heaps.share is None or heaps.share.owns(score.name)
            live = score.score_with(view.get(score.name, (0.0, 0))[0]) - declined.get(
                score.name, 0.0
            )
            effective = live + points.of_node(score, owned)
            if effective != -math.inf:
                entries.append((effective, -position, score))
        entries.sort(key=lambda entry: entry[:2], reverse=True)
        return [(effective, -negative, score) for effective, negative, score in entries[:count]]

    def new_key(self) -> int:
        """A key for a booking, unique in this process."""
        return next(self._state._keys)

    def book(
        self,
        node: str,
        bandwidth: float,
        at: float,
        key: int,
        workload: Workload | None = None,
        unlearned: bool = False,
        template: Workload | None = None,
    ) -> None:
        """Book this replica's own admission of a pod of ``workload`` (of
        ``template``, its ReplicaSet) on ``node`` (``unlearned``: booked at
        the default)."""
        state = self._state
        state._replicas.admitted(at)
        state._book(node, bandwidth, at, key, state.replica or "", workload, unlearned, template)

    def pods_in_flight(self, workload: Workload) -> int:
        """``workload``'s pods booked and not measured yet, on every node."""
        return self._state._bookings.in_flight.pods.get(workload, 0)

    def in_flight(self, workload: Workload) -> dict[str, int]:
        """node -> ``workload``'s pods booked there and not measured yet:
        the live view, read within this admission only."""
        return self._state._bookings.in_flight.per_node.get(workload, {})

    def live_places(self) -> LivePlaces | None:
        """Every workload's pods per node as the watches show them (a view,
        read within this admission only); None until the watches of the
        steered and the unsteered pods have listed them all."""
        state = self._state
        return state._bookings.placed.live() if state.places_followed() else None


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
        # Set once the watches that place every pod that runs have listed
        # (follow_places); none: the placed pods are the bookings' alone.
        self._listed: tuple[threading.Event, ...] = ()

    def follow_places(self, *listed: threading.Event) -> None:
        """The placed pods are every pod that runs once each of ``listed``
        is set: the watches of the steered and the unsteered pods
        (``synced``) have listed them."""
        self._listed = listed

    def places_followed(self) -> bool:
        return bool(self._listed) and all(event.is_set() for event in self._listed)

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
            bookings.set_zones(heaps.zone_of)
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
        bookings.set_zones(self._heaps.zone_of)

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
        workload: Workload | None = None,
        unlearned: bool = False,
        template: Workload | None = None,
    ) -> int:
        """Book a pod this process did not admit (``replica`` steered it:
        another one, or this one before a restart), seen in the watch;
        returns the booking's key here, for ``rebook`` and ``release``."""
        with self._lock:
            self._replicas.saw(replica, at)
            key = next(self._keys)
            self._book(node, bandwidth, at, key, replica, workload, unlearned, template)
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
    def off_zone_share(self) -> float:
        """Of the bindings shown lately, the share outside the zone booked
        (inflight/placed.py; exported)."""
        with self._lock:
            return self._bookings.placed.off_zone_share

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

    def place_seen(self, node: str, workload: Workload, template: Workload | None) -> int:
        """Record, without booking it, a steered pod the watch shows on
        ``node`` whose traffic the measurements show already (its workload's
        spread counts it); returns its key here, for ``gone``."""
        with self._lock:
            key = next(self._keys)
            self._bookings.placed.place(key, workload, template, node)
            return key

    def place_again(
        self, key: int, node: str, workload: Workload, template: Workload | None
    ) -> None:
        """Record again this process's pod booked as ``key``, shown bound to
        ``node`` after its place went unbound with its booking (placed.py)."""
        with self._lock:
            self._bookings.placed.place(key, workload, template, node)

    @property
    def never_shown(self) -> int:
        """Pods admitted here whose place went unshown: never created (exported)."""
        with self._lock:
            return self._bookings.placed.never_shown

    def place_unsteered(self, node: str, workload: Workload, template: Workload | None) -> int:
        """Record a pod no replica steered, bound to ``node`` (its workload's
        spread counts it; the steered pods' lists leave it be); returns its
        key here, for ``gone``."""
        with self._lock:
            key = next(self._keys)
            self._bookings.placed.place(key, workload, template, node, steered=False)
            return key

    def is_placed(self, key: int) -> bool:
        """Whether the pod booked or recorded as ``key`` is counted as placed."""
        with self._lock:
            return key in self._bookings.placed

    def gone(self, key: int) -> bool:
        """The pod booked or recorded as ``key`` is terminating, finished or deleted
        after its binding: its place goes, and what of its booking the
        measurements do not show yet. False when it had neither."""
        with self._lock:
            while self._walking:
                self._walked.wait()
            bookings = self._bookings
            placed = key in bookings.placed
            ended = bookings.end(key)
            if ended is not None:
                self._rerank((ended[0],), ended[1])
            return placed or ended is not None

    def keep_placed(self, keys: set[int]) -> None:
        """After a fresh list of the steered pods: forget the steered pods
        placed that are neither in ``keys`` (the listed ones) nor still in
        flight (admitted, maybe not created yet)."""
        with self._lock:
            bookings = self._bookings
            bookings.placed.keep_only(lambda key: key in keys or bookings.is_pending(key))

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
        workload: Workload | None,
        unlearned: bool,
        template: Workload | None,
    ) -> None:
        counted = self._bookings.add(
            node, bandwidth, at, key, replica, workload, unlearned, template
        )
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
