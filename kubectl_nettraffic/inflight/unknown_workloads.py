"""Spreading the burst of a workload booked at the configured default.

A pod is booked at ``steering.defaultPodBandwidth`` only while nothing at
all has been learned, not even a cluster-wide figure: the webhook was just
installed, or learning is off. That figure says nothing of what the pod
will send, and booked that light a whole burst fits on the few quietest
nodes. Its pods likely send alike, so each of its pods steered lately
counts against its node for the next one of the same workload:
``POINTS_PER_POD`` score points a pod, until the measurements show them.

Pods booked at a learned figure (their workload's or the cluster-wide one)
are booked by it alone: with a figure that carries information, spreading
on top placed worse (docs/design/new-workloads.md). Five points is the
figure measured best there: a few points make a burst's pods prefer other
quiet nodes before a second pod on one; much more pushes them onto busy
nodes.
"""

from collections import deque

from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap

POINTS_PER_POD = 5.0


class UnknownWorkloadPods:
    """The pods of not-yet-learned workloads steered lately, per node.

    ``horizon``: seconds after its admission a pod is in the measurements
    (podStartup + window). Not thread-safe: its owner (InflightState) holds
    its lock around every call."""

    def __init__(self, horizon: float) -> None:
        self._horizon = horizon
        self._pods: dict[Workload, dict[str, int]] = {}
        self._log: deque[tuple[float, Workload, str]] = deque()  # admission order

    def add(self, workload: Workload, node: str, at: float) -> None:
        nodes = self._pods.setdefault(workload, {})
        nodes[node] = nodes.get(node, 0) + 1
        self._log.append((at, workload, node))

    def handicap(self, workload: Workload, now: float) -> Handicap | None:
        """Points each node loses for the next pod of ``workload``; None when
        none of its pods is in flight."""
        self._forget(now - self._horizon)
        nodes = self._pods.get(workload)
        if not nodes:
            return None

        def points(score: NodeScore) -> float:
            return POINTS_PER_POD * nodes.get(score.name, 0)

        return points

    def _forget(self, before: float) -> None:
        log = self._log
        while log and log[0][0] < before:
            _, workload, node = log.popleft()
            nodes = self._pods[workload]
            nodes[node] -= 1
            if not nodes[node]:
                del nodes[node]
                if not nodes:
                    del self._pods[workload]
