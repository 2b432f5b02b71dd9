"""The steered pods that run or will, each on the node it was bound to:
what a workload's spread counts (scoring/spread.py), and where a pod's
peers run for their pull (steering/peer_pull.py), with the pods no
replica steered.

A booking lives until a measurement shows its pod (bookings.py); the
spread must count the pod as long as it runs, as kube-scheduler's own
constraints count it. Counted over the bookings alone, a Deployment
scaled up again and again drifted past its zone skew: each burst kept the
skew over the pods in flight, none over the ones before. So every booked
pod has a record here, by its booking key, from its admission (on its
first preference) through its binding (moved to its node) until the
binding watch sees it terminating, finished or deleted (kube/binding_watch.py;
kube-scheduler's spread counts none of those, kube/watch_lines.py); another
replica's pods are recorded as the watch shows them, also those too old to
book; and the pods no replica steered (those that ran before the install,
say) as their own watch shows them bound (kube/unsteered_pods.py).

A pod recorded at its admission is unbound until its binding shows: it may
run in another zone than its first preference, as often as the bindings
shown lately did (``off_zone_share``): kube-scheduler scores only a sample
of a large cluster's nodes (percentageOfNodesToScore), and the sample may
hold none of the pod's preferred nodes. So the spread keeps room for the
pods that may have gone astray, and for the pod being placed, which may
go astray too (``skew_room``; scoring/spread.py).

A pod admitted here and not shown bound by the time a measurement would
show its traffic (bookings.py) goes then. Never shown at all, it was never
created: a later admission plugin refused it (a ResourceQuota, another
webhook), and its ReplicaSet may try again and again (counted as
``never_shown``): kept, each refused attempt would count in its
workload's spread until a list of the steered pods, which a healthy
watch never makes again. Shown but not bound, it is Pending, and
kube-scheduler's spread counts bound pods alone.
Either comes back when the watch shows it bound (and so does a pod the
watch missed while it was down, from the list that follows).
"""

from collections.abc import Callable, Mapping
from typing import NamedTuple

from kubectl_nettraffic.inflight.workload_counts import WorkloadCounts
from kubectl_nettraffic.kube.workloads import Workload

# The bindings the off-zone share averages: the last few bursts.
BINDINGS_AVERAGED = 200


class _Placed(NamedTuple):
    workload: Workload
    template: Workload | None  # its ReplicaSet, for the pods one owns
    node: str
    steered: bool  # False: a pod no replica steered (kube/unsteered_pods.py)
    bound: bool  # False: on its first preference, its binding not shown yet
    shown: bool  # False: admitted here, not shown by the watch yet (maybe never created)


class LivePlaces(NamedTuple):
    """Every workload's pods per node as the watches show them now, and the
    change that last counted each (``stamps``: what was worked out of them
    holds while they stay); the zones each workload's and each ReplicaSet's
    pods run in (``zones``)."""

    per_node: Mapping[Workload, Mapping[str, int]]
    stamps: Mapping[Workload, int]
    per_zone: Mapping[Workload, Mapping[str, int]]
    template_zones: Mapping[Workload, Mapping[str, int]]

    def zones(self, workload: Workload, template: str | None) -> frozenset[str]:
        """The zones of ``workload``'s pods of ``template`` (its ReplicaSet's
        name; None: every pod of it)."""
        if template is None:
            return frozenset(self.per_zone.get(workload, ()))
        replica_set = Workload(workload.namespace, "ReplicaSet", template)
        return frozenset(self.template_zones.get(replica_set, ()))


class PlacedPods:
    """Pods per workload (``workloads``) and per template (``templates``,
    for the pods a ReplicaSet owns), per node and per zone; per workload
    and per template, the pods not shown bound yet (``unbound``); and of the
    bindings shown lately, the share outside the zone booked."""

    def __init__(self) -> None:
        self._pods: dict[int, _Placed] = {}
        self.workloads = WorkloadCounts()
        # workload -> the change that last counted it (none left: not here);
        # a workload counted again later gets a later one.
        self.stamps: dict[Workload, int] = {}
        self._changes = 0
        self.templates = WorkloadCounts()
        self.unbound: dict[Workload, int] = {}
        self.off_zone_share = 0.0
        self._bindings = 0  # shown so far, up to BINDINGS_AVERAGED
        self.never_shown = 0  # records dropped unshown: pods admitted, never created

    def skew_room(self, group: Workload) -> int:
        """The zone skew to keep free for the pods of ``group`` (a workload
        or a template) not shown bound yet and the pod being placed: each
        not shown bound that runs outside the zone it was booked in may add
        two (one zone more, one less), as often as the share of bindings
        outside their zone says; one at least, the pod being placed, which
        may itself run in a fuller zone than its preference."""
        unbound = self.unbound.get(group, 0)
        return max(1, round(2 * unbound * self.off_zone_share))

    def __contains__(self, key: int) -> bool:
        return key in self._pods

    def place(
        self,
        key: int,
        workload: Workload,
        template: Workload | None,
        node: str,
        steered: bool = True,
        bound: bool = True,
        shown: bool = True,
    ) -> None:
        """The pod booked as ``key`` is on ``node``: where it was bound, or
        (``bound`` False) its first preference; ``steered`` False: a pod no
        replica steered; ``shown`` False: admitted here, not shown by the watch."""
        self.remove(key)
        placed = self._pods[key] = _Placed(workload, template, node, steered, bound, shown)
        self._count(placed, 1)

    def shown(self, key: int) -> None:
        """The watch showed the pod booked as ``key``: it was created."""
        placed = self._pods.get(key)
        if placed is not None and not placed.shown:
            self._pods[key] = placed._replace(shown=True)

    def forget_unbound(self, key: int) -> None:
        """The booking of ``key`` is measured: its record goes if the watch
        has not shown the pod bound (the module's docstring)."""
        placed = self._pods.get(key)
        if placed is not None and not placed.bound:
            self.remove(key)
            if not placed.shown:
                self.never_shown += 1

    def move(self, key: int, node: str) -> None:
        """The pod booked as ``key`` was bound to ``node``."""
        placed = self._pods.get(key)
        if placed is None or (placed.node == node and placed.bound):
            return
        if not placed.bound:
            self._binding_shown(placed.node, node)
        self.place(key, placed.workload, placed.template, node, placed.steered)

    def _binding_shown(self, booked: str, bound: str) -> None:
        zone_of = self.workloads.zone_of
        off_zone = 1.0 if zone_of.get(booked) != zone_of.get(bound) else 0.0
        # The mean of those shown while few, then a moving one.
        self._bindings = min(self._bindings + 1, BINDINGS_AVERAGED)
        self.off_zone_share += (off_zone - self.off_zone_share) / self._bindings

    def remove(self, key: int) -> bool:
        """The pod booked as ``key`` is gone (deleted, or will never run);
        False when it was not here."""
        placed = self._pods.pop(key, None)
        if placed is not None:
            self._count(placed, -1)
        return placed is not None

    def keep_only(self, kept: Callable[[int], bool]) -> None:
        """Forget every steered pod whose key is not ``kept`` (after a fresh
        list of the steered pods: the deletions a dropped watch missed)."""
        for key in [key for key, placed in self._pods.items() if placed.steered and not kept(key)]:
            self.remove(key)

    def set_zones(self, zone_of: Mapping[str, str]) -> None:
        self.workloads.set_zones(zone_of)
        self.templates.set_zones(zone_of)

    def live(self) -> LivePlaces:
        """The places as they are: a view, read under the in-flight lock."""
        workloads, templates = self.workloads, self.templates
        return LivePlaces(workloads.per_node, self.stamps, workloads.per_zone, templates.per_zone)

    def _count(self, placed: _Placed, pods: int) -> None:
        workload = placed.workload
        self.workloads.add(workload, placed.node, pods)
        self._changes += 1
        if workload in self.workloads.pods:
            self.stamps[workload] = self._changes
        else:
            self.stamps.pop(workload, None)
        if placed.template is not None:
            self.templates.add(placed.template, placed.node, pods)
        if placed.bound:
            return
        for group in (placed.workload, placed.template):
            if group is not None:
                left = self.unbound.get(group, 0) + pods
                if left > 0:
                    self.unbound[group] = left
                else:
                    self.unbound.pop(group, None)
