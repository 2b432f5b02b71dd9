"""The in-flight ledger: pods steered recently, counted against the node they
were steered to until a measurement can see their traffic.

A pod admitted at ``t`` starts sending at ``t + pod_startup``; a rate() over
``window`` then shows a growing share of its traffic, all of it once a full
window has passed. Against a measurement at ``T`` the pod still counts

    unseen = bandwidth * (1 - clamp((T - t - pod_startup) / window, 0, 1))

so with ``edge = T - pod_startup`` every booking is in one of three phases:

    hidden  t >= edge                   unseen = bandwidth
    ramp    edge - window < t < edge    unseen = bandwidth * (t - (edge - window)) / window
    shown   t <= edge - window          unseen = 0: forgotten

Bookings go into one log in time order. Each node keeps running sums of
bandwidth and of bandwidth * t over its bookings in the ramp, so its
unseen load is a formula of a few sums. A measurement time only moves
forward, and each booking crosses each phase boundary once: a new
measurement time walks only the bookings that changed phase since the last
one, plus those still hidden, however many pods are in the ramp: never a
pass over every booking.

A booking is an append at the log's end, plus one value in the view, so an
admission touches memory that is already in the CPU's caches however many
nodes a burst spreads over; the cost moves to each new measurement time, in
a batch (docs/design/admission-performance.md compares this with per-node
lists; python -m bench.ledger times a 150,000-booking burst).

A booking made with a key can follow its pod (bindings.py): ``move`` puts
it on the node the scheduler bound the pod to, ``drop`` takes it back for
a pod that will never run. Either changes the booking in place, so it keeps
its time and leaves the log when it would have; the views change by the
booking's unseen share, the same formula read for one booking. A dropped
booking stays in the log with no bandwidth, skipped by the sums.

A new measurement time's walk is batch work (a refresh's worth of
bookings crossing, every hidden one summed), and admissions book all the
while. ``prepare`` does it beside them: it reads the log up to its end at
that moment, which nothing but ``add`` changes while the caller holds off
``move`` and ``drop``, and builds the next view and sums apart. ``commit``
then puts them in place, adding the few bookings made meanwhile (all
hidden: they came after the measurement). Anything else that changed the
log in between (a move, a drop, a booking before the edge, another new
view) voids the prepared one, and commit walks under the lock instead.
"""

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

# Forgotten bookings are cut from the log's front once they are this many and
# at least half of it, so trimming stays amortised O(1) per booking.
_TRIM_AT = 1024

# A node's sums over its bookings in the ramp: bandwidth, bandwidth * time,
# pods. Immutable, so that a copy of the mapping is a consistent one.
RampSums = tuple[float, float, int]


@dataclass
class NextView:
    """A measurement time's view and sums, prepared beside the bookings;
    ``commit`` puts them in place."""

    edge: float
    shown: int
    hidden: int
    unkeyed: int  # the keys of forgotten bookings before it are gone
    end: int  # the log's length when prepared: later bookings are replayed
    changes: int  # the ledger's count of changes other than appends, when prepared
    ramp: dict[str, RampSums]
    view: dict[str, tuple[float, int]]


class InflightLedger:
    """Bookings against nodes, viewed as unseen load for a measurement time.

    ``window`` must be positive (config validation guarantees it).
    """

    def __init__(self, pod_startup: float, window: float) -> None:
        self.pod_startup = pod_startup
        self.window = window
        # _lock: appends and swaps, held briefly. _walk: a walk over the log
        # or a change to a booking in place, so that nothing but appends
        # happens beside a prepare; taken before _lock.
        self._lock = threading.Lock()
        self._walk = threading.Lock()
        # Times are kept relative to the first one seen, so bandwidth * time stays small.
        self._origin: float | None = None
        self._last = float("-inf")  # latest booking; later ones never go before it
        # The log, in time order: log[_shown:_hidden] are in the ramp of the
        # current measurement, log[_hidden:] are hidden; before _shown, forgotten.
        self._times = array("d")
        self._bandwidths = array("d")
        self._nodes: list[str] = []
        # Keyed bookings: key -> absolute index (position in the log + _base),
        # and each booking's key (0: none), cut from the front with the log.
        self._keys = array("q")
        self._index_of: dict[int, int] = {}
        self._base = 0
        self._shown = 0
        self._hidden = 0
        self._unkeyed = 0  # keys of forgotten bookings go one walk later, off the lock
        self._ramp: dict[str, RampSums] = {}  # node -> its sums over the ramp
        self._edge: float | None = None  # of the current measurement, relative
        self._view: dict[str, tuple[float, int]] = {}
        self._changes = 0  # changes other than appends: a prepared view older is void

    def _relative(self, at: float) -> float:
        if self._origin is None:
            self._origin = at
        return at - self._origin

    def add(self, node: str, bandwidth: float, at: float, key: int = 0) -> None:
        """Book ``bandwidth`` bytes/s on ``node`` for a pod admitted at ``at``;
        a positive ``key`` (unique) lets ``move`` and ``drop`` find it later."""
        if bandwidth <= 0:
            return  # nothing the measurement could miss
        with self._lock:
            at = self._relative(at)
            if at > self._last:
                self._last = at  # else a clock step back: booked at the latest time seen, in order
            self._times.append(self._last)
            self._bandwidths.append(bandwidth)
            self._nodes.append(node)
            self._keys.append(key)
            if key:
                self._index_of[key] = self._base + len(self._times) - 1
            edge = self._edge
            if edge is None:
                return  # no view yet: the first one is computed from the log
            # One value swap per node: readers of the shared view stay safe.
            if self._last >= edge:
                # The usual booking: after the current measurement's edge, so all
                # of it is unseen, and the node's figure grows by exactly this pod.
                unseen, pods = self._view.get(node, (0.0, 0))
                self._view[node] = (unseen + bandwidth, pods + 1)
                return
            # Before the edge (the clock behind the measurement): in the ramp,
            # or already shown. Either way it is not hidden.
            self._changes += 1
            self._hidden = len(self._times)
            if self._last > edge - self.window:
                before = self._node_ramp_unseen(node)
                _enter(self._ramp, node, bandwidth, self._last)
                unseen, pods = self._view.get(node, (0.0, 0))
                self._view[node] = (unseen - before + self._node_ramp_unseen(node), pods + 1)
            else:
                self._shown = self._hidden  # shown already, as is all before it

    def _node_ramp_unseen(self, node: str) -> float:
        """Unseen bytes/s of ``node``'s bookings in the ramp of the current measurement."""
        sums = self._ramp.get(node)
        if sums is None or self._edge is None:
            return 0.0
        return _ramp_unseen(sums, self._edge, self.window)

    def view(self, measured_at: float) -> Mapping[str, tuple[float, int]]:
        """node -> (bytes/s not yet visible in a measurement at ``measured_at``, pods).

        Measurements only move forward: asked about one older than the latest
        seen, the ledger answers for the latest. Such a call is a reader still
        holding the previous snapshot while a refresh publishes the next
        (/scores, an extender call); moving back would hand the Steerer's
        admissions a view that its bookings no longer update. (After a wall
        clock step back, newer snapshots count their pods against the latest
        measurement until they pass it.) The mapping is live and shared: look
        values up, do not change it; bookings update it until the next
        measurement replaces it.
        """
        with self._walk, self._lock:
            edge = self._relative(measured_at) - self.pod_startup
            if self._edge is None or edge > self._edge:
                self._put(self._next(edge))
            return self._view

    def prune(self, measured_at: float) -> None:
        """Forget pods whose traffic a measurement at ``measured_at`` fully shows."""
        self.view(measured_at)

    def prepare(self, measured_at: float) -> NextView | None:
        """The view of a measurement at ``measured_at``, worked out beside
        the bookings (``add`` goes on; ``move`` and ``drop`` wait) and not in
        place until ``commit``. None: not newer than the current one."""
        with self._walk:
            with self._lock:
                edge = self._relative(measured_at) - self.pod_startup
                if self._edge is not None and edge <= self._edge:
                    return None
                start = self._start()
            return self._next(edge, start)

    def commit(self, prepared: NextView) -> set[str] | None:
        """Put ``prepared`` in place: its view, with the bookings made since
        it was prepared added, becomes the live one. Returns the nodes those
        bookings changed; None when it was void and the view was worked out
        here instead (or a newer one is in place already)."""
        with self._walk, self._lock:
            times, end = self._times, prepared.end
            if prepared.changes == self._changes and (
                end == len(times) or times[end] >= prepared.edge
            ):
                # Only bookings after the measurement came meanwhile: all hidden.
                view, nodes, bandwidths = prepared.view, self._nodes, self._bandwidths
                touched = set()
                for index in range(end, len(times)):
                    node, bandwidth = nodes[index], bandwidths[index]
                    unseen, pods = view.get(node, (0.0, 0))
                    view[node] = (unseen + bandwidth, pods + 1)
                    touched.add(node)
                self._put(prepared)
                return touched
            if self._edge is None or prepared.edge > self._edge:
                self._put(self._next(prepared.edge))
            return None

    def _start(self) -> NextView:
        """Where a walk to a new edge starts: the log as it stands (under _lock)."""
        return NextView(
            float("-inf") if self._edge is None else self._edge,
            self._shown,
            self._hidden,
            self._unkeyed,
            len(self._times),
            self._changes,
            dict(self._ramp),
            self._view,
        )

    def _next(self, edge: float, start: NextView | None = None) -> NextView:
        """The view and sums at ``edge``, walked from ``start`` (the log as
        it stood, or as it stands) up to the log's end then. Reads the log and
        changes nothing but forgotten keys: holds _walk, not necessarily _lock."""
        if start is None:
            start = self._start()
        times, bandwidths, nodes, keys = self._times, self._bandwidths, self._nodes, self._keys
        ramp, end = start.ramp, start.end
        # Hidden bookings now before the edge join the ramp ...
        joined = bisect_left(times, edge, start.hidden, end)
        for index in range(start.hidden, joined):
            bandwidth = bandwidths[index]
            if bandwidth:  # else dropped
                _enter(ramp, nodes[index], bandwidth, times[index])
        # ... and ramp bookings now at or before its start are shown: forgotten.
        left = bisect_right(times, edge - self.window, start.shown, joined)
        for index in range(start.shown, left):
            bandwidth = bandwidths[index]
            if bandwidth:
                _leave(ramp, nodes[index], bandwidth, times[index])
        # The keys of those forgotten at the current edge go (of those forgotten
        # now, at the next walk: until this one is in place, they may still move).
        index_of = self._index_of
        for key in keys[start.unkeyed : start.shown]:
            if key:
                index_of.pop(key, None)
        view = {
            node: (_ramp_unseen(sums, edge, self.window), sums[2]) for node, sums in ramp.items()
        }
        for index in range(joined, end):
            bandwidth = bandwidths[index]
            if bandwidth:
                node = nodes[index]
                unseen, pods = view.get(node, (0.0, 0))
                view[node] = (unseen + bandwidth, pods + 1)
        return NextView(edge, left, joined, start.shown, end, start.changes, ramp, view)

    def _put(self, prepared: NextView) -> None:
        """Make ``prepared`` current (under both locks). A new mapping, not an
        update: readers holding the old one keep a consistent view of the
        previous measurement."""
        self._edge, self._shown, self._hidden = prepared.edge, prepared.shown, prepared.hidden
        self._unkeyed, self._ramp, self._view = prepared.unkeyed, prepared.ramp, prepared.view
        self._changes += 1
        self._trim()

    def _trim(self) -> None:
        """Cut forgotten bookings whose keys are gone from the log's front, now and then."""
        cut = self._unkeyed
        if cut >= _TRIM_AT and cut * 2 >= len(self._times):
            del self._times[:cut], self._bandwidths[:cut], self._nodes[:cut], self._keys[:cut]
            self._shown, self._hidden, self._unkeyed = self._shown - cut, self._hidden - cut, 0
            self._base += cut

    def is_pending(self, key: int) -> bool:
        """Whether ``key`` may still move or drop (a lock-free read: a hint)."""
        return key in self._index_of

    def move(self, key: int, node: str) -> tuple[str, float] | None:
        """Put the booking ``key`` on ``node`` (where its pod was bound), once.

        Returns (the node it was on, the bytes/s of it still unseen at the
        current measurement), that node being ``node`` itself when the pod
        was bound where it was booked; or None when there is nothing to
        move: an unknown or already settled key, a dropped or forgotten
        booking. A booking moves once; after that its key is forgotten.
        """
        with self._walk, self._lock:
            index = self._settle(key)
            if index is None:
                return None
            old = self._nodes[index]
            unseen = self._unseen(index)
            if old == node:
                return old, unseen
            self._changes += 1
            if index >= self._shown and index < self._hidden:
                bandwidth, at = self._bandwidths[index], self._times[index]
                _leave(self._ramp, old, bandwidth, at)
                _enter(self._ramp, node, bandwidth, at)
            self._nodes[index] = node
            if self._edge is not None:
                self._shift(old, -unseen, -1)
                self._shift(node, unseen, 1)
            return old, unseen

    def drop(self, key: int) -> tuple[str, float] | None:
        """Take the booking ``key`` back (its pod will not run), once.

        Returns (its node, the bytes/s of it still unseen), or None as ``move`` does.
        """
        with self._walk, self._lock:
            index = self._settle(key)
            if index is None:
                return None
            node, unseen = self._nodes[index], self._unseen(index)
            self._changes += 1
            if index >= self._shown and index < self._hidden:
                _leave(self._ramp, node, self._bandwidths[index], self._times[index])
            self._bandwidths[index] = 0.0
            if self._edge is not None:
                self._shift(node, -unseen, -1)
            return node, unseen

    def _settle(self, key: int) -> int | None:
        """The log position of a live booking ``key``, whose key is then forgotten."""
        absolute = self._index_of.pop(key, None)
        if absolute is None:
            return None
        index = absolute - self._base
        if index < 0 or (self._edge is not None and index < self._shown):
            return None  # forgotten: a measurement shows its traffic already
        if not self._bandwidths[index]:
            return None
        return index

    def _unseen(self, index: int) -> float:
        """One booking's share of its node's unseen load at the current measurement."""
        bandwidth = self._bandwidths[index]
        if self._edge is None or index >= self._hidden:
            return bandwidth
        share = (self._times[index] - (self._edge - self.window)) / self.window
        return bandwidth * (0.0 if share < 0 else 1.0 if share > 1 else share)

    def _shift(self, node: str, bandwidth: float, pods: int) -> None:
        """Change one node's figure in the view by one value swap (readers stay safe)."""
        unseen, count = self._view.get(node, (0.0, 0))
        count += pods
        if count <= 0:
            self._view.pop(node, None)
        else:
            self._view[node] = (max(0.0, unseen + bandwidth), count)


def _enter(ramp: dict[str, RampSums], node: str, bandwidth: float, at: float) -> None:
    """A booking at ``at`` joins ``node``'s sums over the ramp."""
    sums = ramp.get(node)
    if sums is None:
        ramp[node] = (bandwidth, bandwidth * at, 1)
    else:
        ramp[node] = (sums[0] + bandwidth, sums[1] + bandwidth * at, sums[2] + 1)


def _leave(ramp: dict[str, RampSums], node: str, bandwidth: float, at: float) -> None:
    """A booking at ``at`` leaves ``node``'s sums over the ramp."""
    sums = ramp[node]
    if sums[2] == 1:
        del ramp[node]  # the sums start again from exact zeros
    else:
        ramp[node] = (sums[0] - bandwidth, sums[1] - bandwidth * at, sums[2] - 1)


def _ramp_unseen(sums: RampSums, edge: float, window: float) -> float:
    """Unseen bytes/s of the bookings summed in ``sums`` against ``edge``."""
    # max(): rounding must not turn an almost-shown pod's remainder negative.
    return max(0.0, (sums[1] - (edge - window) * sums[0]) / window)
