"""A workload's pods per node and per zone, kept as rows come, move and go
(the bookings store's ``in_flight`` and ``unlearned`` views)."""

from collections.abc import Hashable, Mapping
from typing import TypeVar

from kubectl_nettraffic.kube.workloads import Workload

Key = TypeVar("Key", bound=Hashable)


def counted(
    counts: dict[Workload, dict[Key, int]], workload: Workload, key: Key, pods: int
) -> None:
    """``pods`` more (or fewer) of ``workload`` at ``key`` in ``counts``; none left: gone."""
    places = counts.setdefault(workload, {})
    count = places.get(key, 0) + pods
    if count > 0:
        places[key] = count
    else:
        places.pop(key, None)
        if not places:
            del counts[workload]


class WorkloadCounts:
    """Pods per workload (``pods``), per node (``per_node``) and per zone
    (``per_zone``, by ``zone_of``, which ``set_zones`` renews), and how many
    of a workload's nodes hold each count (``fewest`` reads it)."""

    def __init__(self) -> None:
        self.pods: dict[Workload, int] = {}
        self.per_node: dict[Workload, dict[str, int]] = {}
        self.per_zone: dict[Workload, dict[str, int]] = {}
        self.zone_of: Mapping[str, str] = {}
        self._levels: dict[Workload, dict[int, int]] = {}  # pods -> nodes holding as many

    def fewest(self, workload: Workload, nodes: int) -> int:
        """The workload's pods on the node with fewest of ``nodes``: 0
        unless it has a pod on as many."""
        if len(self.per_node.get(workload, ())) < nodes:
            return 0
        return min(self._levels[workload])

    def holding_more(self, workload: Workload, pods: int) -> int:
        """The nodes holding more than ``pods`` of the workload's pods."""
        return sum(nodes for held, nodes in self._levels.get(workload, {}).items() if held > pods)

    def add(self, workload: Workload, node: str, pods: int) -> None:
        before = self.per_node.get(workload, {}).get(node, 0)
        if before:
            counted(self._levels, workload, before, -1)
        if before + pods > 0:
            counted(self._levels, workload, before + pods, 1)
        counted(self.per_node, workload, node, pods)
        total = self.pods.get(workload, 0) + pods
        if total > 0:
            self.pods[workload] = total
        else:
            self.pods.pop(workload, None)
        zone = self.zone_of.get(node)
        if zone:
            counted(self.per_zone, workload, zone, pods)

    def set_zones(self, zone_of: Mapping[str, str]) -> None:
        """The nodes' zones: the pods counted per zone again when they changed."""
        if zone_of == self.zone_of:
            return
        self.zone_of, self.per_zone = zone_of, {}
        for workload, nodes in self.per_node.items():
            for node, pods in nodes.items():
                zone = zone_of.get(node)
                if zone:
                    counted(self.per_zone, workload, zone, pods)
