"""The bookings store: one row per pod steered lately, and the views derived from the rows.

A booking counts a pod's expected bandwidth against a node until a
measurement shows the pod's traffic. Its row holds the node, the bandwidth
(bytes/s), when it was admitted, its key, the replica that steered it, its
workload when that is unlearned (booked at the default), and its state:

    pending   its key may still move it (the pod was bound) or drop it (it will not run)
    settled   moved or kept once, or booked without a key
    dropped   bandwidth 0: its pod will not run
    measured  a measurement shows its traffic: forgotten, cut from the log later

One expiry rule, the measurement's. A pod admitted at ``t`` starts sending
at ``t + pod_startup``; a rate() over ``window`` then shows a growing share
of its traffic, all of it a full window later. With ``edge`` the
measurement time less ``pod_startup``, every row is in one phase:

    hidden    t >= edge                 unseen = bandwidth
    ramp      edge - window < t < edge  unseen = bandwidth * (t - (edge - window)) / window
    measured  t <= edge - window        unseen = 0

The views, kept current as rows come, move and go:

- ``view``: node -> (unseen bytes/s, pods), the node's unseen load;
- ``unlearned``: workload -> node -> its pods booked there (an unlearned
  burst spreads, unlearned.py);
- ``declined``: the nodes a booking moved away from since the current
  measurement (declined.py).

Rows are appended in time order to columns: arrays, and the node names'
list (a burst keeps 150,000 rows; the garbage collector visits a list's
every item, an array's none, so replicas and workloads are kept as indexes
into short lists). Each node keeps running sums
of bandwidth and bandwidth * time over its rows in the ramp, so its unseen
load is a formula of three numbers, and a new measurement walks only the
rows that changed phase since the last one plus those still hidden.

Not thread-safe: InflightState (state.py) holds its one lock around every
call, but for ``walk``, which reads the log as it stood at ``start`` while
appends go on (and nothing else: moves and drops wait for it).
"""

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from kubectl_nettraffic.inflight.declined_nodes import DECLINE_POINTS
from kubectl_nettraffic.kube.workloads import Workload

# Measured rows are cut from the log's front once they are this many and at
# least half of it, so trimming stays amortised O(1) per booking.
_TRIM_AT = 1024
# A pod its watch has not shown this long after its admission counts as
# shown after this long (the watch is down or far behind).
DELAY_MOST = 1.0
# Seconds from an admission to the watch showing the pod, until one is
# measured: tens of milliseconds on a healthy control plane.
WATCH_DELAY = 0.05
# Weight of each new figure in the watch delay's moving average: about the last ten pods.
DELAY_WEIGHT = 0.1

# A node's sums over its rows in the ramp: bandwidth, bandwidth * time, pods.
RampSums = tuple[float, float, int]
# A change of one unlearned workload's count on one node: (workload, node, pods).
CountChange = tuple[Workload, str, int]
UnseenView = dict[str, tuple[float, int]]


class Moved(NamedTuple):
    """What ``move`` changed."""

    left: str  # the node the row was on (the one it was moved to: kept there)
    counts: list[CountChange]  # unlearned counts
    declined: float  # the points the node left loses more (0: declined already, or kept)


class Booking(NamedTuple):
    """One row, as read back (``Bookings.booking``)."""

    node: str
    bandwidth: float  # 0: dropped
    admitted_at: float  # relative to the store's first booking
    replica: str  # "" for a process without a replica id
    unlearned: Workload | None
    pending: bool


@dataclass
class Walk:
    """A measurement's view and sums, walked beside the appends; ``commit`` puts them in place."""

    edge: float
    measured: int  # rows before it are measured
    hidden: int  # rows from it on are hidden
    unkeyed: int  # keys of rows before it are gone
    end: int  # the log's length when walked: later rows are added at commit
    changes: int  # the store's changes other than appends when it started
    ramp: dict[str, RampSums]
    view: UnseenView
    forgotten: list[CountChange]  # unlearned rows the walk measured


class Bookings:
    """``window`` must be positive (config validation guarantees it);
    ``replica``: this process's id, whose own rows time the watch."""

    def __init__(self, pod_startup: float, window: float, replica: str = "") -> None:
        self.pod_startup, self.window, self.replica = pod_startup, window, replica
        self._origin: float | None = None  # times are relative to it: bandwidth * time stays small
        self._last = float("-inf")  # latest row; later ones never go before it
        # The columns. log[_measured:_hidden] are in the ramp, log[_hidden:] hidden.
        self._times = array("d")
        self._bandwidths = array("d")
        self._nodes: list[str] = []
        self._keys = array("q")  # 0: none
        self._replicas = array("I")  # index into _replica_ids
        self._unlearned = array("i")  # index into _workload_list; -1: learned
        self._unshown = bytearray()  # 1: this replica's row its watch has not shown
        self._replica_ids: list[str] = []
        self._workload_list: list[Workload] = []
        self._index_of_id: dict[str, int] = {}
        self._index_of_workload: dict[Workload, int] = {}
        self._index_of: dict[int, int] = {}  # pending key -> absolute row (position + _base)
        self._base = 0
        self._measured = self._hidden = self._unkeyed = 0
        self._delay_from = 0  # rows before it are timed for the watch already
        self._ramp: dict[str, RampSums] = {}
        self._edge: float | None = None
        self.view: UnseenView = {}
        self.unlearned: dict[Workload, dict[str, int]] = {}
        self.declined: dict[str, float] = {}
        self.declined_total = 0  # nodes declined, each once per measurement
        self.watch_delay = WATCH_DELAY
        self.changes = 0  # changes other than appends since the last walk put in place

    # -- rows ---------------------------------------------------------------

    def add(
        self,
        node: str,
        bandwidth: float,
        at: float,
        key: int = 0,
        replica: str = "",
        unlearned: Workload | None = None,
    ) -> CountChange | None:
        """Book ``bandwidth`` bytes/s on ``node`` for a pod admitted at
        ``at``; a positive ``key`` (unique) lets ``move`` and ``drop`` find
        it. Returns the unlearned count it changed, if any."""
        if self._origin is None:
            self._origin = at
        at -= self._origin
        if at > self._last:
            self._last = at  # else a clock step back: booked at the latest time seen, in order
        self._times.append(self._last)
        self._bandwidths.append(bandwidth)
        self._nodes.append(node)
        self._keys.append(key)
        self._replicas.append(_index(replica, self._index_of_id, self._replica_ids))
        if unlearned is None:
            self._unlearned.append(-1)
        else:
            self._unlearned.append(_index(unlearned, self._index_of_workload, self._workload_list))
        self._unshown.append(1 if key and replica and replica == self.replica else 0)
        if key:
            self._index_of[key] = self._base + len(self._times) - 1
        self._enter_view(node, bandwidth)
        return None if unlearned is None else self._count(unlearned, node, 1)

    def _enter_view(self, node: str, bandwidth: float) -> None:
        edge = self._edge
        if edge is None:
            return  # no view yet: the first one is walked from the log
        # One value swap per node.
        if self._last >= edge:
            # The usual row: after the measurement's edge, all of it unseen.
            unseen, pods = self.view.get(node, (0.0, 0))
            self.view[node] = (unseen + bandwidth, pods + 1)
            return
        # Before the edge (the clock behind the measurement): in the ramp, or
        # measured already. Either way it is not hidden.
        self.changes += 1
        self._hidden = len(self._times)
        if self._last > edge - self.window:
            before = self._node_ramp_unseen(node)
            _enter(self._ramp, node, bandwidth, self._last)
            unseen, pods = self.view.get(node, (0.0, 0))
            self.view[node] = (unseen - before + self._node_ramp_unseen(node), pods + 1)
        else:
            self._measured = self._hidden  # measured already, as is all before it

    def is_pending(self, key: int) -> bool:
        """Whether ``key`` may still move or drop."""
        return key in self._index_of

    def booking(self, key: int) -> Booking | None:
        """The row of a pending ``key``."""
        absolute = self._index_of.get(key)
        if absolute is None:
            return None
        i = absolute - self._base
        return Booking(
            self._nodes[i],
            self._bandwidths[i],
            self._times[i],
            self._replica_ids[self._replicas[i]],
            self._workload(self._unlearned[i]),
            True,
        )

    def _workload(self, index: int) -> Workload | None:
        return None if index < 0 else self._workload_list[index]

    def move(self, key: int, node: str) -> Moved | None:
        """Put the pending row ``key`` on ``node`` (where its pod was bound),
        once; None when nothing is pending under ``key``. The node it leaves
        declines (declined_nodes.py)."""
        index = self._settle(key)
        if index is None:
            return None
        old = self._nodes[index]
        if old == node:
            return Moved(old, [], 0.0)
        self.changes += 1
        unseen = self._unseen(index)
        if self._measured <= index < self._hidden:
            bandwidth, at = self._bandwidths[index], self._times[index]
            _leave(self._ramp, old, bandwidth, at)
            _enter(self._ramp, node, bandwidth, at)
        self._nodes[index] = node
        if self._edge is not None:
            self._shift(old, -unseen, -1)
            self._shift(node, unseen, 1)
        declined = 0.0
        if old not in self.declined:
            declined = self.declined[old] = DECLINE_POINTS
            self.declined_total += 1
        workload = self._workload(self._unlearned[index])
        if workload is None:
            return Moved(old, [], declined)
        counts = [self._count(workload, old, -1), self._count(workload, node, 1)]
        return Moved(old, counts, declined)

    def drop(self, key: int) -> tuple[str, list[CountChange]] | None:
        """Take the pending row ``key`` back (its pod will not run), once:
        (its node, the unlearned counts changed), or None as ``move``."""
        index = self._settle(key)
        if index is None:
            return None
        node, unseen = self._nodes[index], self._unseen(index)
        self.changes += 1
        if self._measured <= index < self._hidden:
            _leave(self._ramp, node, self._bandwidths[index], self._times[index])
        self._bandwidths[index] = 0.0
        if self._edge is not None:
            self._shift(node, -unseen, -1)
        workload = self._workload(self._unlearned[index])
        return node, [] if workload is None else [self._count(workload, node, -1)]

    def _settle(self, key: int) -> int | None:
        """The log position of the pending row ``key``, which is then settled."""
        absolute = self._index_of.pop(key, None)
        if absolute is None:
            return None
        index = absolute - self._base
        if index < 0 or (self._edge is not None and index < self._measured):
            return None  # measured already
        if not self._bandwidths[index]:
            return None
        return index

    def _unseen(self, index: int) -> float:
        """One row's share of its node's unseen load at the current measurement."""
        bandwidth = self._bandwidths[index]
        if self._edge is None or index >= self._hidden:
            return bandwidth
        share = (self._times[index] - (self._edge - self.window)) / self.window
        return bandwidth * (0.0 if share < 0 else 1.0 if share > 1 else share)

    def _shift(self, node: str, bandwidth: float, pods: int) -> None:
        unseen, count = self.view.get(node, (0.0, 0))
        count += pods
        if count <= 0:
            self.view.pop(node, None)
        else:
            self.view[node] = (max(0.0, unseen + bandwidth), count)

    def _count(self, workload: Workload, node: str, pods: int) -> CountChange:
        nodes = self.unlearned.setdefault(workload, {})
        count = nodes.get(node, 0) + pods
        if count > 0:
            nodes[node] = count
        else:
            nodes.pop(node, None)
            if not nodes:
                del self.unlearned[workload]
        return workload, node, pods

    def _node_ramp_unseen(self, node: str) -> float:
        sums = self._ramp.get(node)
        if sums is None or self._edge is None:
            return 0.0
        return _ramp_unseen(sums, self._edge, self.window)

    # -- the watch ----------------------------------------------------------

    def shown(self, key: int, at: float) -> None:
        """The watch showed, at ``at``, this replica's pod booked as ``key``:
        the watch delay's next figure."""
        self.time_unshown(at)
        absolute = self._index_of.get(key)
        if absolute is not None and self._unshown[absolute - self._base]:
            index = absolute - self._base
            self._unshown[index] = 0
            assert self._origin is not None
            delay = at - self._origin - self._times[index]
            self._timed(min(max(delay, 0.0), DELAY_MOST))

    def time_unshown(self, now: float) -> None:
        """This replica's pods not shown DELAY_MOST after their admission, as
        of ``now``, count as shown after DELAY_MOST (the watch is down or far behind)."""
        if self._origin is not None:
            self._time_unshown_before(now - self._origin - DELAY_MOST)

    def _time_unshown_before(self, oldest: float) -> None:
        times, unshown = self._times, self._unshown
        index = max(self._delay_from - self._base, 0)
        while index < len(times) and times[index] <= oldest:
            if unshown[index]:
                unshown[index] = 0
                self._timed(DELAY_MOST)
            index += 1
        self._delay_from = index + self._base

    def _timed(self, seconds: float) -> None:
        self.watch_delay += DELAY_WEIGHT * (seconds - self.watch_delay)

    # -- measurements -------------------------------------------------------

    def edge_of(self, measured_at: float) -> float:
        if self._origin is None:
            self._origin = measured_at
        return measured_at - self._origin - self.pod_startup

    def is_newer(self, edge: float) -> bool:
        return self._edge is None or edge > self._edge

    def start(self) -> Walk:
        """Where a walk to a new edge starts: the log as it stands."""
        return Walk(
            float("-inf") if self._edge is None else self._edge,
            self._measured,
            self._hidden,
            self._unkeyed,
            len(self._times),
            self.changes,
            dict(self._ramp),
            self.view,
            [],
        )

    def walk(self, edge: float, start: Walk) -> Walk:
        """The view and sums at ``edge``, walked from ``start`` to the log's
        end then. Reads rows, and changes only keys measured at ``start``'s edge."""
        times, bandwidths, nodes, unlearned = (
            self._times,
            self._bandwidths,
            self._nodes,
            self._unlearned,
        )
        ramp, end = start.ramp, start.end
        # Hidden rows now before the edge join the ramp ...
        joined = bisect_left(times, edge, start.hidden, end)
        for index in range(start.hidden, joined):
            bandwidth = bandwidths[index]
            if bandwidth:  # else dropped
                _enter(ramp, nodes[index], bandwidth, times[index])
        # ... and ramp rows now at or before its start are measured.
        left = bisect_right(times, edge - self.window, start.measured, joined)
        forgotten = []
        for index in range(start.measured, left):
            bandwidth = bandwidths[index]
            if bandwidth:
                _leave(ramp, nodes[index], bandwidth, times[index])
                workload = unlearned[index]
                if workload >= 0:
                    forgotten.append((self._workload_list[workload], nodes[index], -1))
        # Keys of rows measured at the start's edge go (those measured now go
        # at the next walk: until this one is in place, they may still move).
        index_of = self._index_of
        for key in self._keys[start.unkeyed : start.measured]:
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
        return Walk(edge, left, joined, start.measured, end, start.changes, ramp, view, forgotten)

    def commit(self, walked: Walk) -> tuple[set[str], list[CountChange]] | None:
        """Put ``walked`` in place, with the rows appended since added to its
        view: the nodes they touched and the unlearned counts the walk
        forgot. None when it is void (changes other than appends came since
        it started, or a row before its edge), and nothing changed."""
        times, end = self._times, walked.end
        if walked.changes != self.changes or not (end == len(times) or times[end] >= walked.edge):
            return None
        view, nodes, bandwidths = walked.view, self._nodes, self._bandwidths
        touched = set()
        for index in range(end, len(times)):  # after the measurement: all hidden
            node, bandwidth = nodes[index], bandwidths[index]
            unseen, pods = view.get(node, (0.0, 0))
            view[node] = (unseen + bandwidth, pods + 1)
            touched.add(node)
        return touched, self._put(walked)

    def measure(self, measured_at: float) -> list[CountChange]:
        """A new snapshot measured at ``measured_at``: walk to it and put it
        in place, if it is newer than the current measurement (else the
        current one stays); the unlearned counts it forgot."""
        edge = self.edge_of(measured_at)
        if not self.is_newer(edge):
            self.declined = {}
            return []
        return self._put(self.walk(edge, self.start()))

    def _put(self, walked: Walk) -> list[CountChange]:
        self._edge, self._measured, self._hidden = walked.edge, walked.measured, walked.hidden
        self._unkeyed, self._ramp, self.view = walked.unkeyed, walked.ramp, walked.view
        self.declined = {}  # every node is named on its measurement again
        self.changes += 1
        forgotten = [self._count(workload, node, -1) for workload, node, _ in walked.forgotten]
        self._trim()
        return forgotten

    def _trim(self) -> None:
        """Cut measured rows whose keys are gone from the log's front, now and then."""
        cut = self._unkeyed
        if cut >= _TRIM_AT and cut * 2 >= len(self._times):
            self._time_unshown_before(self._times[cut - 1])
            del self._times[:cut], self._bandwidths[:cut], self._nodes[:cut], self._keys[:cut]
            del self._replicas[:cut], self._unlearned[:cut], self._unshown[:cut]
            self._measured, self._hidden, self._unkeyed = (
                self._measured - cut,
                self._hidden - cut,
                0,
            )
            self._base += cut


T = TypeVar("T", str, Workload)


def _index(value: T, index_of: dict[T, int], values: list[T]) -> int:
    """``value``'s index in ``values``, appended the first time."""
    index = index_of.get(value)
    if index is None:
        index = index_of[value] = len(values)
        values.append(value)
    return index


def _enter(ramp: dict[str, RampSums], node: str, bandwidth: float, at: float) -> None:
    """A row at ``at`` joins ``node``'s sums over the ramp."""
    sums = ramp.get(node)
    if sums is None:
        ramp[node] = (bandwidth, bandwidth * at, 1)
    else:
        ramp[node] = (sums[0] + bandwidth, sums[1] + bandwidth * at, sums[2] + 1)


def _leave(ramp: dict[str, RampSums], node: str, bandwidth: float, at: float) -> None:
    """A row at ``at`` leaves ``node``'s sums over the ramp."""
    sums = ramp[node]
    if sums[2] == 1:
        del ramp[node]  # the sums start again from exact zeros
    else:
        ramp[node] = (sums[0] - bandwidth, sums[1] - bandwidth * at, sums[2] - 1)


def _ramp_unseen(sums: RampSums, edge: float, window: float) -> float:
    """Unseen bytes/s of the rows summed in ``sums`` against ``edge``."""
    # max(): rounding must not turn an almost-measured pod's remainder negative.
    return max(0.0, (sums[1] - (edge - window) * sums[0]) / window)
