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

Each node keeps its bookings in time order with running sums of bandwidth
and of bandwidth * t, so both phase boundaries are two binary searches and a
node's unseen load is a formula of four sums. A booking costs O(log n); a new
measurement time costs O(nodes with bookings * log n), however many pods
were admitted. (Summing every booking per refresh, as this once did, was a
pass over 150,000 entries under the lock at 1,000 admissions/s.)
"""

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping

# Forgotten bookings are dropped from a node's lists once they are this many
# and at least half of them, so trimming stays amortised O(1) per booking.
_TRIM_AT = 64

# Bookings wait in a queue and enter their nodes' lists this many at a time,
# and whenever a new measurement time needs the lists (InflightLedger.add).
_ENTER_AT = 64


class _NodeBookings:
    """One node's bookings in time order, with running sums from ``start``.

    The numbers are kept in ``array('d')``, not lists: the garbage collector
    does not walk arrays, and at 1,000 admissions/s a window's worth of
    bookings is hundreds of thousands of list slots that every full
    collection visited, with all threads stopped (20 ms for 150,000 bookings,
    under 1 ms as arrays). Doubles either way, so the sums are the same.
    """

    __slots__ = ("bandwidth", "start", "times", "weighted")

    def __init__(self) -> None:
        self.times = array("d")
        # bandwidth[i]: sum of bandwidth of bookings before i; weighted[i]: of bandwidth * t.
        self.bandwidth = array("d", (0.0,))
        self.weighted = array("d", (0.0,))
        self.start = 0  # bookings before this are forgotten

    def add(self, at: float, bandwidth: float) -> None:
        self.times.append(at)
        self.bandwidth.append(self.bandwidth[-1] + bandwidth)
        self.weighted.append(self.weighted[-1] + bandwidth * at)

    def unseen(self, edge: float, window: float) -> tuple[float, int]:
        """(unseen bytes/s, pods not yet fully visible) for a measurement at ``edge + startup``."""
        ramp_start = edge - window
        times, total = self.times, self.bandwidth
        first = bisect_right(times, ramp_start, self.start)
        hidden = bisect_left(times, edge, first)
        ramp = total[hidden] - total[first]
        weighted = self.weighted[hidden] - self.weighted[first]
        # max(): rounding must not turn an almost-shown pod's remainder negative.
        unseen = total[-1] - total[hidden] + max(0.0, (weighted - ramp_start * ramp) / window)
        return unseen, len(times) - first

    def forget_until(self, edge: float, window: float) -> None:
        """Forget bookings fully shown at ``edge``; trim the lists now and then."""
        self.start = bisect_right(self.times, edge - window, self.start)
        if self.start >= _TRIM_AT and self.start * 2 >= len(self.times):
            cut = self.start
            base, base_weighted = self.bandwidth[cut], self.weighted[cut]
            self.times = self.times[cut:]
            self.bandwidth = array("d", [value - base for value in self.bandwidth[cut:]])
            self.weighted = array("d", [value - base_weighted for value in self.weighted[cut:]])
            self.start = 0

    @property
    def empty(self) -> bool:
        return self.start == len(self.times)


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
        self._nodes: dict[str, _NodeBookings] = {}
        self._edge: float | None = None  # of the current measurement, relative
        self._view: dict[str, tuple[float, int]] = {}
        # (node, bandwidth, relative time) of bookings not in _nodes yet; in the view already.
        self._queued: list[tuple[str, float, float]] = []

    def _relative(self, at: float) -> float:
        if self._origin is None:
            self._origin = at
        return at - self._origin

    def add(self, node: str, bandwidth: float, at: float) -> None:
        """Book ``bandwidth`` bytes/s on ``node`` for a pod admitted at ``at``.

        The view counts the booking at once; the node's lists get it with the
        next batch. Under load the code and the node map that entering runs on
        leave the CPU's caches between two admissions; entered 64 at a time,
        they stay in cache for the batch. With cold caches an admission cost
        about 4 us less this way (throwaway timing, the way
        bench.admission_cost measures). The node's own lists are cold either
        way when a burst spreads over thousands of nodes: that is most of what
        5,000 nodes cost over 100 in the server (docs/operations.md).
        """
        if bandwidth <= 0:
            return  # nothing the measurement could miss
        with self._lock:
            at = self._relative(at)
            if at > self._last:
                self._last = at  # else a clock step back: booked at the latest time seen, in order
            queued = self._queued
            queued.append((node, bandwidth, self._last))
            if self._edge is None:
                pass  # no view yet: the first one is computed from the lists
            elif self._last >= self._edge:
                # The usual booking: after the current measurement's edge, so all
                # of it is unseen, and the node's figure (current for this edge)
                # grows by exactly this pod. No searches: side by side under
                # load, a median 16 us less worker CPU per admission at 5,000 nodes.
                # One value swap per node: readers of the shared view stay safe.
                unseen, pods = self._view.get(node, (0.0, 0))
                self._view[node] = (unseen + bandwidth, pods + 1)
                if len(queued) < _ENTER_AT:
                    return
            else:
                # Before the edge (the clock behind the measurement): the node's
                # figure needs its lists, this booking in them.
                self._enter_queued()
                unseen, pods = self._nodes[node].unseen(self._edge, self.window)
                if pods:
                    self._view[node] = (unseen, pods)
            self._enter_queued()

    def _enter_queued(self) -> None:
        """Enter the queued bookings in their nodes' lists, in order; under the lock."""
        nodes = self._nodes
        for node, bandwidth, at in self._queued:
            bookings = nodes.get(node)
            if bookings is None:
                bookings = nodes[node] = _NodeBookings()
            bookings.add(at, bandwidth)
        self._queued.clear()

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
        self._enter_queued()
        self._edge = edge
        # A new mapping, not an update: readers holding the old one keep a
        # consistent view of the previous measurement.
        view: dict[str, tuple[float, int]] = {}
        for node, bookings in list(self._nodes.items()):
            bookings.forget_until(edge, self.window)
            if bookings.empty:
                del self._nodes[node]
                continue
            view[node] = bookings.unseen(edge, self.window)
        self._view = view
