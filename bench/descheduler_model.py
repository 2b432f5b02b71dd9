"""A model of the descheduler's loop, LowNodeUtilization in Prometheus mode,
for the rebalancing benchmark.

Each rule follows the upstream place it names (kubernetes-sigs/descheduler):

- Cycles: one every ``deschedulingInterval`` (the Deployment mode of its
  chart; pkg/descheduler/descheduler.go runs the profiles, then waits).
- The reading: one sample per node from the query, 0..1, as whole percent
  truncated (nodeutilization/usageclients.go, prometheusUsageClient.sync:
  ``int64(sample.Value*100)``). The recording rule clamps to 1.
- Classification (nodeutilization/lownodeutilization.go, Balance, with
  isNodeBelowThreshold and isNodeAboveThreshold): under when the reading is
  at or below ``thresholds``, over when above ``targetThresholds``. Nothing
  is evicted when no node is under, when every node is under, or when none
  is over.
- Order: the over nodes by usage, highest first (sortNodesByUsage).
- Evictions: the node's removable pods (DefaultEvictor: here, those older
  than ``minPodAge``; every simulated pod belongs to a ReplicaSet with
  replicas on other nodes, so no other protection applies) in priority
  order (pkg/descheduler/pod/pods.go, SortPodsBasedOnPriorityLowToHigh);
  all simulated pods share one priority and QoS class, so the order is the
  lister's, modelled as random. At most ``evictionLimits.node`` per node per
  cycle; in Prometheus mode podUsage is not supported
  (usageclients.go), so one eviction per node per cycle whatever the limit
  (the descheduler's README says so of this mode).

Limits: no nodeFit check (every simulated node fits every pod), no
PodDisruptionBudgets, evictions take effect at once (no graceful
termination), the query is answered by the simulation's rate window rather
than a Prometheus server.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kubectl_nettraffic.rebalancing.plan import percent


@dataclass(frozen=True)
class LoopPolicy:
    """The chart's defaults (rebalancing.deschedulerPolicy)."""

    low: float = 40.0  # thresholds.MetricResource, percent
    high: float = 75.0  # targetThresholds.MetricResource, percent
    evictions_per_node: int = 1  # evictionLimits.node
    min_pod_age: float = 600.0  # DefaultEvictor minPodAge, seconds
    # deschedulingInterval, seconds: the rate window, so that each cycle reads
    # a window that already shows the last cycle's eviction.
    interval: float = 120.0


@dataclass(frozen=True)
class RunningPod:
    key: int
    node: int
    started: float  # seconds, simulation time


def reading(utilisation: float) -> int:
    """The percent the descheduler reads from one sample of the recording
    rule, which clamps to 0..1 (the rule the plugin's plan reads with too)."""
    return percent(min(1.0, max(0.0, utilisation)))


def classify(readings: Sequence[int], policy: LoopPolicy) -> tuple[list[int], list[int]]:
    """(under, over): node indexes, over ones highest first."""
    under = [i for i, r in enumerate(readings) if r <= policy.low]
    over = [i for i, r in enumerate(readings) if r > policy.high]
    over.sort(key=lambda i: -readings[i])
    return under, over


def cycle(
    utilisation: Sequence[float],
    pods: Mapping[int, Sequence[RunningPod]],
    now: float,
    policy: LoopPolicy,
    rng: np.random.Generator,
) -> list[RunningPod]:
    """The pods one cycle evicts, given each node's sample and its pods."""
    readings = [reading(u) for u in utilisation]
    under, over = classify(readings, policy)
    if not under or len(under) == len(readings) or not over:
        return []
    per_node = min(policy.evictions_per_node, 1)  # Prometheus mode: one, whatever the limit
    evicted: list[RunningPod] = []
    for node in over:
        removable = [p for p in pods.get(node, ()) if now - p.started >= policy.min_pod_age]
        if not removable:
            continue
        order = rng.permutation(len(removable))
        evicted.extend(removable[int(i)] for i in order[:per_node])
    return evicted
