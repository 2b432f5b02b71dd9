"""The bookings store: one row per pod steered lately, and the views derived from the rows.

A booking counts a pod's expected bandwidth against a node until a
measurement shows the pod's traffic. Its row: node, bandwidth (bytes/s),
admitted at, key, its workload (and whether it is unlearned: booked at the
default), whether it is this replica's and not shown by the watch yet (another
replica's is booked when the watch shows it), and its state:
pending (its key may still move it to the node its pod was bound to, or
drop it), settled (moved or kept once, or booked without a key), dropped
(bandwidth 0: the pod will not run, or ended after its binding), measured
(forgotten; cut later).

One expiry rule, the measurement's. A pod admitted at ``t`` starts sending
at ``t + pod_startup``; a rate() over ``window`` shows a growing share of
it, all of it a full window later. With ``edge`` the measurement time less
``pod_startup``, every row is in one phase:

    hidden    t >= edge                 unseen = bandwidth
    ramp      edge - window < t < edge  unseen = bandwidth * (t - (edge - window)) / window
    measured  t <= edge - window        unseen = 0

The views, kept current as rows come, move and go: ``view`` (node ->
unseen bytes/s, pods), ``in_flight`` (workload -> node, and zone, -> pods:
the fan-in room of peers reads it), ``placed`` (every booked pod until it
goes, on the node it was bound to: the workload's spread reads it,
placed.py), ``unlearned`` (node -> pods for the unlearned rows alone,
handicaps.py),
``declined`` (nodes a booking moved off since the measurement,
handicaps.py) and ``watch_delay``.

Rows go in time order into columns: arrays, and the node names' list (the
garbage collector visits a list's items, an array's none: a burst holds
150,000 rows). Each node keeps running sums of bandwidth and bandwidth *
time over its rows in the ramp, so a new measurement walks only the rows
that changed phase, and the hidden ones.

Not thread-safe: InflightState holds its one lock around every call but
``walk``, which reads the log as it stood at ``start`` while appends go on.
"""

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kubectl_nettraffic.inflight.placed import PlacedPods
from kubectl_nettraffic.inflight.ramp_sums import RampSums, enter, leave, ramp_unseen
from kubectl_nettraffic.inflight.workload_counts import WorkloadCounts, counted
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.ranking.handicaps import DECLINE_POINTS

# Measured rows are cut from the log's front once this many and half of it.
_TRIM_AT = 1024
# The watch delay (admission to the watch showing the pod): tens of ms on a
# healthy control plane, WATCH_DELAY until one is timed; a pod not shown
# DELAY_MOST after its admission counts as shown then; a moving average
# over about the last ten pods.
WATCH_DELAY, DELAY_MOST, DELAY_WEIGHT = 0.05, 1.0, 0.1

# A change of one unlearned workload's count on one node: (workload, node, pods).
CountChange = tuple[Workload, str, int]


class Owners(NamedTuple):
    """A row's workload, and its template (its ReplicaSet; None: not rolled out)."""

    workload: Workload
    template: Workload | None


UnseenView = dict[str, tuple[float, int]]


class Moved(NamedTuple):
    """What ``move`` changed."""

    left: str  # the node the row was on (the one it was moved to: kept there)
    counts: list[CountChange]  # unlearned counts
    declined: float  # the points the node left loses more (0: declined already, or kept)


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
    forgotten: list[
        tuple[Owners, str, bool, int]
    ]  # rows with a workload the walk measured: (owners, node, unlearned, key)


class Bookings:
    """``window`` must be positive (config validation guarantees it);
    ``replica``: this process's id, whose own rows time the watch ("": no
    watch, so a pod's place goes with its booking)."""

    def __init__(self, pod_startup: float, window: float, replica: str = "") -> None:
        self.pod_startup, self.window, self.replica = pod_startup, window, replica
        self._origin: float | None = None  # times are relative to it: bandwidth * time stays small
        self._last = float("-inf")  # latest row; later ones never go before it
        # The columns. log[_measured:_hidden] are in the ramp, log[_hidden:] hidden.
        self._times = array("d")
        self._bandwidths = array("d")
        self._nodes: list[str] = []
        self._keys = array("q")  # 0: none
        self._workload = array("I")  # index into _owners; 0: none
        self._unlearned = bytearray()  # 1: booked at the default (handicaps.py)
        self._unshown = bytearray()  # 1: this replica's row its watch has not shown
        self._owners: list[Owners | None] = [None]
        self._index: dict[Owners | None, int] = {None: 0}
        self._index_of: dict[int, int] = {}  # pending key -> absolute row (position + _base)
        # Moved or kept key -> absolute row, until measured: ``end`` finds it.
        self._bound_of: dict[int, int] = {}
        self._base = 0
        self._measured = self._hidden = self._unkeyed = 0
        self._delay_from = 0  # rows before it are timed for the watch already
        self._ramp: dict[str, RampSums] = {}
        self._edge: float | None = None
        self.view: UnseenView = {}
        self.in_flight = WorkloadCounts()
        self.placed = PlacedPods()
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
        workload: Workload | None = None,
        unlearned: bool = False,
        template: Workload | None = None,
    ) -> CountChange | None:
        """Book ``bandwidth`` bytes/s on ``node`` for a pod of ``workload``
        (of ``template``, its ReplicaSet, if it is rolled out) admitted
        at ``at`` (``unlearned``: booked at the default); a positive ``key``
        (unique) lets ``move`` and ``drop`` find it. Returns the unlearned
        count it changed, if any."""
        if self._origin is None:
            self._origin = at
        at -= self._origin
        if at > self._last:
            self._last = at  # else a clock step back: booked at the latest time seen, in order
        self._times.append(self._last)
        self._bandwidths.append(bandwidth)
        self._nodes.append(node)
        self._keys.append(key)
        owners = None if workload is None else Owners(workload, template)
        self._workload.append(self._intern(owners))
        unlearned = unlearned and workload is not None
        self._unlearned.append(1 if unlearned else 0)
        own = bool(key and replica and replica == self.replica)  # the watch is to show it
        self._unshown.append(1 if own else 0)
        if key:
            self._index_of[key] = self._base + len(self._times) - 1
        self._enter_view(node, bandwidth)
        if owners is None or not bandwidth:
            return None
        self.in_flight.add(owners.workload, node, 1)
        if key:
            self.placed.place(
                key, owners.workload, owners.template, node, bound=False, shown=not own
            )
        return self._count(owners.workload, node, 1) if unlearned else None

    def set_zones(self, zone_of: Mapping[str, str]) -> None:
        """The nodes' zones, for the counts per zone."""
        self.in_flight.set_zones(zone_of)
        self.placed.set_zones(zone_of)

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
            enter(self._ramp, node, bandwidth, self._last)
            unseen, pods = self.view.get(node, (0.0, 0))
            self.view[node] = (unseen - before + self._node_ramp_unseen(node), pods + 1)
        else:
            self._measured = self._hidden  # measured already, as is all before it

    def is_pending(self, key: int) -> bool:
        """Whether ``key`` may still move or drop."""
        return key in self._index_of

    def _intern(self, owners: Owners | None) -> int:
        index = self._index.get(owners)
        if index is None:
            index = self._index[owners] = len(self._owners)
            self._owners.append(owners)
        return index

    def _owners_of(self, row: int) -> Owners | None:
        return self._owners[self._workload[row]]

    def move(self, key: int, node: str) -> Moved | None:
        """Put the pending row ``key`` on ``node`` (where its pod was bound),
        once; None when nothing is pending under ``key``. The node it leaves
        declines (handicaps.py). Its pod's place moves there, pending or not."""
        self.placed.move(key, node)
        index = self._settle(key)
        if index is None:
            return None
        self._bound_of[key] = index + self._base
        old = self._nodes[index]
        if old == node:
            return Moved(old, [], 0.0)
        unseen = self._withdraw(index)
        self._nodes[index] = node
        if self._measured <= index < self._hidden:
            enter(self._ramp, node, self._bandwidths[index], self._times[index])
        if self._edge is not None:
            self._shift(node, unseen, 1)
        declined = 0.0
        if old not in self.declined:
            declined = self.declined[old] = DECLINE_POINTS
            self.declined_total += 1
        owners = self._owners_of(index)
        if owners is None:
            return Moved(old, [], declined)
        self.in_flight.add(owners.workload, old, -1)
        self.in_flight.add(owners.workload, node, 1)
        if not self._unlearned[index]:
            return Moved(old, [], declined)
        workload = owners.workload
        return Moved(
            old, [self._count(workload, old, -1), self._count(workload, node, 1)], declined
        )

    def drop(self, key: int) -> tuple[str, list[CountChange]] | None:
        """Take the pending row ``key`` back (its pod will not run), once:
        (its node, the unlearned counts changed), or None as ``move``. Its
        pod's place goes, pending or not."""
        self.placed.remove(key)
        index = self._settle(key)
        return None if index is None else self._take_back(index)

    def end(self, key: int) -> tuple[str, list[CountChange]] | None:
        """The pod booked as ``key`` ended after its binding (terminating,
        finished or deleted): it sends nothing more, so what of its row the
        measurements do not show yet goes, pending or moved, once; a Job's pod
        that exits at once holds its node no longer. As ``drop`` otherwise."""
        self.placed.remove(key)
        absolute = self._index_of.pop(key, None)
        if absolute is None:
            absolute = self._bound_of.pop(key, None)
        index = self._row(absolute)
        return None if index is None else self._take_back(index)

    def _take_back(self, index: int) -> tuple[str, list[CountChange]]:
        self._withdraw(index)
        self._bandwidths[index] = 0.0
        node, owners = self._nodes[index], self._owners_of(index)
        if owners is None:
            return node, []
        self.in_flight.add(owners.workload, node, -1)
        return node, [self._count(owners.workload, node, -1)] if self._unlearned[index] else []

    def _withdraw(self, index: int) -> float:
        """Take a row out of its node's sums and view: its unseen share."""
        self.changes += 1
        node, unseen = self._nodes[index], self._unseen(index)
        if self._measured <= index < self._hidden:
            leave(self._ramp, node, self._bandwidths[index], self._times[index])
        if self._edge is not None:
            self._shift(node, -unseen, -1)
        return unseen

    def _settle(self, key: int) -> int | None:
        """The log position of the pending row ``key``, which is then settled."""
        return self._row(self._index_of.pop(key, None))

    def _row(self, absolute: int | None) -> int | None:
        """The log position of a keyed row; None when measured or dropped already."""
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
        counted(self.unlearned, workload, node, pods)
        return workload, node, pods

    def _node_ramp_unseen(self, node: str) -> float:
        sums = self._ramp.get(node)
        if sums is None or self._edge is None:
            return 0.0
        return ramp_unseen(sums, self._edge, self.window)

    # -- the watch ----------------------------------------------------------

    def shown(self, key: int, at: float) -> None:
        """The watch showed, at ``at``, this replica's pod booked as ``key``:
        the watch delay's next figure."""
        self.placed.shown(key)
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
            {},  # a walk builds its view from the sums and the hidden rows
            [],
        )

    def walk(self, edge: float, start: Walk) -> Walk:
        """The view and sums at ``edge``, walked from ``start`` to the log's
        end then. Reads rows, and changes only keys measured at ``start``'s edge."""
        times, bandwidths, nodes, workloads, unlearned = (
            self._times,
            self._bandwidths,
            self._nodes,
            self._workload,
            self._unlearned,
        )
        ramp, end = start.ramp, start.end
        # Hidden rows now before the edge join the ramp ...
        joined = bisect_left(times, edge, start.hidden, end)
        for index in range(start.hidden, joined):
            bandwidth = bandwidths[index]
            if bandwidth:  # else dropped
                enter(ramp, nodes[index], bandwidth, times[index])
        # ... and ramp rows now at or before its start are measured.
        left = bisect_right(times, edge - self.window, start.measured, joined)
        forgotten = []
        for index in range(start.measured, left):
            bandwidth = bandwidths[index]
            if bandwidth:
                leave(ramp, nodes[index], bandwidth, times[index])
                if workloads[index]:
                    owners = self._owners[workloads[index]]
                    assert owners is not None  # workloads[index] is not 0
                    key = self._keys[index]
                    forgotten.append((owners, nodes[index], bool(unlearned[index]), key))
        # Keys of rows measured at the start's edge go (those measured now go
        # at the next walk: until this one is in place, they may still move).
        index_of, bound_of = self._index_of, self._bound_of
        for key in self._keys[start.unkeyed : start.measured]:
            if key:
                index_of.pop(key, None)
                bound_of.pop(key, None)
        view = {
            node: (ramp_unseen(sums, edge, self.window), sums[2]) for node, sums in ramp.items()
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
        forgotten = []
        for owners, node, unlearned, key in walked.forgotten:
            self.in_flight.add(owners.workload, node, -1)
            if not self.replica:
                self.placed.remove(key)  # no watch tells when it goes
            else:
                self.placed.forget_unbound(key)  # never created, or Pending
            if unlearned:
                forgotten.append(self._count(owners.workload, node, -1))
        self._trim()
        return forgotten

    def _trim(self) -> None:
        """Cut measured rows whose keys are gone from the log's front, now and then."""
        cut = self._unkeyed
        if cut >= _TRIM_AT and cut * 2 >= len(self._times):
            self._time_unshown_before(self._times[cut - 1])
            del self._times[:cut], self._bandwidths[:cut], self._nodes[:cut], self._keys[:cut]
            del self._workload[:cut], self._unlearned[:cut], self._unshown[:cut]
            self._measured, self._hidden, self._unkeyed = (
                self._measured - cut,
                self._hidden - cut,
                0,
            )
            self._base += cut
