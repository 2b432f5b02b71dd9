"""The steered pods that run or will, each on the node it was bound to:
what a workload's spread counts (scoring/spread.py).

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
"""

from collections.abc import Callable, Mapping
from typing import NamedTuple

from kubectl_nettraffic.inflight.workload_counts import WorkloadCounts
from kubectl_nettraffic.kube.workloads import Workload


class _Placed(NamedTuple):
    workload: Workload
    template: Workload | None  # its ReplicaSet, for the pods one owns
    node: str
    steered: bool  # False: a pod no replica steered (kube/unsteered_pods.py)


class PlacedPods:
    """Pods per workload (``workloads``) and per template (``templates``,
    for the pods a ReplicaSet owns), per node and per zone."""

    def __init__(self) -> None:
        self._pods: dict[int, _Placed] = {}
        self.workloads = WorkloadCounts()
        self.templates = WorkloadCounts()

    def __contains__(self, key: int) -> bool:
        return key in self._pods

    def place(
        self,
        key: int,
        workload: Workload,
        template: Workload | None,
        node: str,
        steered: bool = True,
    ) -> None:
        """The pod booked as ``key`` is on ``node`` (its first preference, or
        where it was bound); ``steered`` False: a pod no replica steered."""
        self.remove(key)
        self._pods[key] = _Placed(workload, template, node, steered)
        self._count(workload, template, node, 1)

    def move(self, key: int, node: str) -> None:
        """The pod booked as ``key`` was bound to ``node``."""
        placed = self._pods.get(key)
        if placed is not None and placed.node != node:
            self.place(key, placed.workload, placed.template, node, placed.steered)

    def remove(self, key: int) -> bool:
        """The pod booked as ``key`` is gone (deleted, or will never run);
        False when it was not here."""
        placed = self._pods.pop(key, None)
        if placed is not None:
            self._count(placed.workload, placed.template, placed.node, -1)
        return placed is not None

    def keep_only(self, kept: Callable[[int], bool]) -> None:
        """Forget every steered pod whose key is not ``kept`` (after a fresh
        list of the steered pods: the deletions a dropped watch missed)."""
        for key in [key for key, placed in self._pods.items() if placed.steered and not kept(key)]:
            self.remove(key)

    def set_zones(self, zone_of: Mapping[str, str]) -> None:
        self.workloads.set_zones(zone_of)
        self.templates.set_zones(zone_of)

    def _count(self, workload: Workload, template: Workload | None, node: str, pods: int) -> None:
        self.workloads.add(workload, node, pods)
        if template is not None:
            self.templates.add(template, node, pods)
