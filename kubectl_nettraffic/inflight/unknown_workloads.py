"""Spreading the burst of a workload booked at the configured default.

A pod is booked at ``steering.defaultPodBandwidth`` only while nothing at
all has been learned, not even a cluster-wide figure: the webhook was just
installed, or learning is off. That figure says nothing of what the pod
will send, and booked that light a whole burst fits on the few quietest
nodes. Its pods likely send alike, so each of its pods steered lately
counts against its node for the next one of the same workload:
``POINTS_PER_POD`` score points a pod, until the measurements show them.
A pod counts where its booking is: on the node it was bound to once the
binding watch moves it there, and no more once its booking is dropped.

Pods booked at a learned figure (their workload's or the cluster-wide one)
are booked by it alone: with a figure that carries information, spreading
on top placed worse (docs/design/new-workloads.md). A few points make a
burst's pods prefer other quiet nodes before a second pod on one; many
more push them onto busy nodes.
"""

from collections import deque
from collections.abc import Sequence

from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.scoring.node_scores import NodeScore
from kubectl_nettraffic.scoring.placement import Handicap

POINTS_PER_POD = 5.0

# A change of one workload's count on one node: (workload, node, pods).
CountChange = tuple[Workload, str, int]


class UnknownWorkloadPods:
    """The pods of not-yet-learned workloads steered lately, per node.

    ``horizon``: seconds after its admission a pod is in the measurements
    (podStartup + window). Every change returns the counts it changed, so
    that the owner can keep what it derives from them current. Not
    thread-safe: its owner (InflightState) holds its lock around every
    call.

    Its pods are kept in plain tuples of floats, ints and strs only (a
    workload as its three strs: a NamedTuple is a tuple subclass, which the
    garbage collector keeps tracking), so that the collector stops tracking
    them: a burst keeps a hundred thousand in flight, and tracked objects
    are each visited at every full collection, a pause on the admission
    path."""

    def __init__(self, horizon: float) -> None:
        self._horizon = horizon
        self._pods: dict[Workload, dict[str, int]] = {}
        # Admission order: (at, key, workload's strs, the node it was booked on).
        self._log: deque[tuple[float, int, tuple[str, str, str], str]] = deque()
        # key -> (workload's strs, node now), until forgotten or dropped
        self._where: dict[int, tuple[tuple[str, str, str], str]] = {}
        self._open: set[int] = set()  # keys not yet moved or dropped

    def add(self, workload: Workload, node: str, at: float, key: int = 0) -> CountChange:
        """A pod of ``workload`` booked on ``node`` at ``at``; a positive
        ``key`` (its booking's) lets ``move`` and ``drop`` find it."""
        plain = (workload.namespace, workload.kind, workload.name)
        self._log.append((at, key, plain, node))
        if key:
            self._where[key] = (plain, node)
            self._open.add(key)
        return self._count(workload, node, 1)

    def move(self, key: int, node: str) -> list[CountChange]:
        """The pod booked as ``key`` was bound to ``node`` (once)."""
        if key not in self._open:
            return []
        self._open.discard(key)
        plain, left = self._where[key]
        if left == node:
            return []
        self._where[key] = (plain, node)
        workload = Workload(*plain)
        return [self._count(workload, left, -1), self._count(workload, node, 1)]

    def drop(self, key: int) -> list[CountChange]:
        """The pod booked as ``key`` will not run."""
        if key not in self._open:
            return []
        self._open.discard(key)
        plain, node = self._where.pop(key)
        return [self._count(Workload(*plain), node, -1)]

    def forget(self, now: float) -> Sequence[CountChange]:
        """Pods the measurements show by ``now`` count no more: the counts
        that changed (usually none, and then no list is made)."""
        log, before = self._log, now - self._horizon
        if not log or log[0][0] >= before:
            return ()
        changes = []
        while log and log[0][0] < before:
            _, key, plain, node = log.popleft()
            if key:
                self._open.discard(key)
                node = self._where.pop(key, (plain, ""))[1]  # "": dropped already
            if node:
                changes.append(self._count(Workload(*plain), node, -1))
        return changes

    def in_flight(self, workload: Workload) -> dict[str, int]:
        """node -> pods of ``workload`` counted there (live: look up only)."""
        return self._pods.get(workload) or {}

    def handicap(self, workload: Workload) -> Handicap | None:
        """Points each node loses for the next pod of ``workload``; None when
        none of its pods is in flight. ``forget`` first."""
        nodes = self._pods.get(workload)
        if not nodes:
            return None

        def points(score: NodeScore) -> float:
            return POINTS_PER_POD * nodes.get(score.name, 0)

        return points

    def _count(self, workload: Workload, node: str, pods: int) -> CountChange:
        nodes = self._pods.setdefault(workload, {})
        count = nodes.get(node, 0) + pods
        if count > 0:
            nodes[node] = count
        else:
            nodes.pop(node, None)
            if not nodes:
                del self._pods[workload]
        return workload, node, pods
