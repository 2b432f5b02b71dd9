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
pass over every booking under the lock.

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
"""

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping

# Forgotten bookings are cut from the log's front once they are this many and
# at least half of it, so trimming stays amortised O(1) per booking.
_TRIM_AT = 1024


class InflightLedger:
    """Bookings against nodes, viewed as unseen load for a measurement time.

    ``window`` must be positive (config validation guarantees it).
    """

    def __init__(self, pod_startup: float, window: float) -> None:
        self.pod_startup = pod_startup
        self.window = window
        self._lock = threading.Lock()
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
        # node -> [bandwidth, bandwidth * t, pods] summed over its bookings in the ramp.
        self._ramp: dict[str, list[float]] = {}
        self._edge: float | None = None  # of the current measurement, relative
        self._view: dict[str, tuple[float, int]] = {}

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
            self._hidden = len(self._times)
            if self._last > edge - self.window:
                before = self._ramp_unseen(node)
                self._enter_ramp(len(self._times) - 1)
                unseen, pods = self._view.get(node, (0.0, 0))
                self._view[node] = (unseen - before + self._ramp_unseen(node), pods + 1)
            else:
                self._shown = self._hidden  # shown already, as is all before it

    def _enter_ramp(self, index: int) -> None:
        node, bandwidth = self._nodes[index], self._bandwidths[index]
        if not bandwidth:
            return  # dropped
        sums = self._ramp.get(node)
        if sums is None:
            sums = self._ramp[node] = [0.0, 0.0, 0]
        sums[0] += bandwidth
        sums[1] += bandwidth * self._times[index]
        sums[2] += 1

    def _leave_ramp(self, index: int) -> None:
        node, bandwidth = self._nodes[index], self._bandwidths[index]
        if not bandwidth:
            return  # dropped
        sums = self._ramp[node]
        if sums[2] == 1:
            del self._ramp[node]  # the sums start again from exact zeros
            return
        sums[0] -= bandwidth
        sums[1] -= bandwidth * self._times[index]
        sums[2] -= 1

    def _ramp_unseen(self, node: str) -> float:
        """Unseen bytes/s of ``node``'s bookings in the ramp of the current measurement."""
        sums = self._ramp.get(node)
        if sums is None or self._edge is None:
            return 0.0
        # max(): rounding must not turn an almost-shown pod's remainder negative.
        return max(0.0, (sums[1] - (self._edge - self.window) * sums[0]) / self.window)

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
        with self._lock:
            edge = self._relative(measured_at) - self.pod_startup
            if self._edge is None or edge > self._edge:
                self._move_to(edge)
            return self._view

    def prune(self, measured_at: float) -> None:
        """Forget pods whose traffic a measurement at ``measured_at`` fully shows."""
        self.view(measured_at)

    def _move_to(self, edge: float) -> None:
        times = self._times
        ramp_start = edge - self.window
        # Hidden bookings now before the edge join the ramp ...
        hidden = bisect_left(times, edge, self._hidden)
        for index in range(self._hidden, hidden):
            self._enter_ramp(index)
        # ... and ramp bookings now at or before its start are shown: forgotten.
        shown = bisect_right(times, ramp_start, self._shown, hidden)
        for index in range(self._shown, shown):
            self._leave_ramp(index)
        self._edge, self._shown, self._hidden = edge, shown, hidden
        # A new mapping, not an update: readers holding the old one keep a
        # consistent view of the previous measurement.
        view = {node: (self._ramp_unseen(node), int(sums[2])) for node, sums in self._ramp.items()}
        bandwidths, nodes = self._bandwidths, self._nodes
        for index in range(hidden, len(times)):
            if not bandwidths[index]:
                continue  # dropped
            node = nodes[index]
            unseen, pods = view.get(node, (0.0, 0))
            view[node] = (unseen + bandwidths[index], pods + 1)
        self._view = view
        self._trim()

    def _trim(self) -> None:
        """Cut forgotten bookings from the log's front, now and then."""
        cut = self._shown
        if cut >= _TRIM_AT and cut * 2 >= len(self._times):
            for key in self._keys[:cut]:
                if key:
                    self._index_of.pop(key, None)
            del self._times[:cut], self._bandwidths[:cut], self._nodes[:cut], self._keys[:cut]
            self._shown, self._hidden = 0, self._hidden - cut
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
        with self._lock:
            index = self._settle(key)
            if index is None:
                return None
            old = self._nodes[index]
            unseen = self._unseen(index)
            if old == node:
                return old, unseen
            if index >= self._shown and index < self._hidden:
                self._leave_ramp(index)
                self._nodes[index] = node
                self._enter_ramp(index)
            else:
                self._nodes[index] = node
            if self._edge is not None:
                self._shift(old, -unseen, -1)
                self._shift(node, unseen, 1)
            return old, unseen

    def drop(self, key: int) -> tuple[str, float] | None:
        """Take the booking ``key`` back (its pod will not run), once.

        Returns (its node, the bytes/s of it still unseen), or None as ``move`` does.
        """
        with self._lock:
            index = self._settle(key)
            if index is None:
                return None
            node, unseen = self._nodes[index], self._unseen(index)
            if index >= self._shown and index < self._hidden:
                self._leave_ramp(index)
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
