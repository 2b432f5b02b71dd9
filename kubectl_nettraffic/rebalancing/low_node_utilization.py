"""One cycle of kubernetes-sigs/descheduler's LowNodeUtilization in
Prometheus mode: which nodes it reads as under and over, and which pods it
evicts from each over node. The rebalance plan (plan.py) and the rebalancing
benchmark (bench/rebalancing_simulation.py) both run this model; each rule
names the upstream place it follows (pkg/ below is the descheduler's):

- Nodes: only Ready ones take part (pkg/descheduler/node/node.go, ReadyNodes
  and IsReady: a node whose Ready condition is not True is left out; one
  with no Ready condition at all is kept).
- Samples: one per node from the query; a listed node without one fails the
  usage client's sync and the plugin does nothing that cycle
  (nodeutilization/usageclients.go, prometheusUsageClient.sync, "unable to
  find metric entry"); so does any sample outside 0..1
  (NodeUsageFromPrometheusMetrics).
- Reading: ``int64(sample*100)`` (NodeUsageFromPrometheusMetrics), then made
  a percentage of a capacity of 100 as ``float64(used)/float64(100)*100``
  (normalizer ResourceUsageToResourceThreshold with
  referencedResourceListForNodeCapacity): in floating point that is not
  always the integer (56 reads as 56.00000000000001, 57 as
  56.99999999999999), which decides the comparison when a reading equals a
  threshold.
- Classification (lownodeutilization.go, Balance; nodeutilization.go,
  isNodeAboveThreshold / isNodeBelowThreshold): under when no threshold is
  below the percentage and the node is schedulable; over when the target
  threshold is below it. Nothing is evicted when no node is under, when
  every node is, or when none is over.
- Order: over nodes by usage, highest first (sortNodesByUsage); each node's
  pods in eviction_rules.eviction_order, ties in the lister's order.
- Evictions per node (nodeutilization.go, evictPods): the Prometheus usage
  client cannot give a pod's usage (podUsage: notSupportedError), so nothing
  is re-measured between evictions: with ``evictionLimits.node`` N set, the
  first N evictable pods go in one cycle; without it, one.

Not modelled: nodeFit, PodDisruptionBudgets, taints of the destinations,
maxNoOfPodsToEvictTotal and per-namespace limits (the chart sets neither).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubectl_nettraffic.rebalancing.eviction_rules import (
    EvictionPolicy,
    PodFacts,
    eviction_order,
    not_evictable,
)


@dataclass(frozen=True)
class Thresholds:
    """The policy's numbers, as the chart renders them."""

    low: float  # thresholds.MetricResource, percent
    high: float  # targetThresholds.MetricResource, percent
    evictions_per_node: int = 1  # evictionLimits.node


@dataclass(frozen=True)
class NodeSample:
    name: str
    sample: float | None  # the query's value for the node; None: no sample
    ready: bool = True
    schedulable: bool = True


@dataclass(frozen=True)
class Classification:
    under: tuple[str, ...]
    over: tuple[str, ...]  # busiest first
    idle: str | None  # why this cycle evicts nothing; None: it evicts


def reading(sample: float) -> int:
    """The whole percent the descheduler keeps of one sample (truncated)."""
    return int(sample * 100)


def percentage(value: int) -> float:
    """A reading as the classification compares it (see the module doc)."""
    return value / 100 * 100


def is_over(value: int, high: float) -> bool:
    return high < percentage(value)


def is_under(value: int, low: float) -> bool:
    return not low < percentage(value)


def descheduler_ready(node: Mapping[str, Any]) -> bool:
    """IsReady on a v1.Node's JSON: False only when a Ready condition says
    anything but True."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    return not any(
        c.get("type") == "Ready" and c.get("status") != "True"
        for c in conditions
        if isinstance(c, Mapping)
    )


def classify(nodes: Sequence[NodeSample], thresholds: Thresholds) -> Classification:
    listed = [n for n in nodes if n.ready]
    missing = [n.name for n in listed if n.sample is None]
    if missing:
        shown = ", ".join(missing[:3]) + (
            f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        )
        return Classification(
            (), (), f"no sample for node {shown}: the descheduler skips the cycle"
        )
    outside = [n.name for n in listed if n.sample is not None and not 0 <= n.sample <= 1]
    if outside:
        return Classification(
            (), (), f"node {outside[0]}'s sample is outside 0..1: the descheduler skips the cycle"
        )
    values = {n.name: reading(n.sample) for n in listed if n.sample is not None}
    under = tuple(
        n.name for n in listed if n.schedulable and is_under(values[n.name], thresholds.low)
    )
    over = tuple(
        sorted(
            (n.name for n in listed if is_over(values[n.name], thresholds.high)),
            key=lambda name: -values[name],
        )
    )
    idle = None
    if not over:
        idle = f"no node is above {thresholds.high:g}%"
    elif not under:
        idle = f"no node is at or below {thresholds.low:g}% to take pods: the descheduler evicts nothing"
    elif len(under) == len(listed):
        idle = f"every node is at or below {thresholds.low:g}%"
    return Classification(under, over, idle)


def victims(
    over: Sequence[str],
    pods: Mapping[str, Sequence[PodFacts]],
    policy: EvictionPolicy,
    owner_pods: Mapping[tuple[str, str, str], int],
    evictions_per_node: int,
) -> dict[str, list[PodFacts]]:
    """The pods one cycle evicts from each over node, in the order it evicts
    them. ``pods``: each node's pods in the lister's order."""
    chosen: dict[str, list[PodFacts]] = {}
    for node in over:
        evictable = [
            p
            for p in eviction_order(pods.get(node, ()))
            if not_evictable(p, policy, owner_pods) is None
        ]
        if evictable:
            chosen[node] = evictable[:evictions_per_node]
    return chosen
