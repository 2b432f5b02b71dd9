"""What the descheduler would move off hot nodes, and where the webhook
would steer each replacement: the plan ``kubectl nettraffic rebalance`` shows.

Pure: nodes (traffic, link speed), pods (rates, eviction facts) and the
policy's thresholds in, a plan out. The descheduler's loop as modelled, from
kubernetes-sigs/descheduler pkg/framework/plugins/nodeutilization/:

- Utilisation is read as whole percent, truncated (usageclients.go,
  prometheusUsageClient.sync: int64(value*100)). A node is over when above
  ``high`` (isNodeAboveThreshold) and a possible destination when at or below
  ``low`` (isNodeBelowThreshold, unschedulable nodes excluded); with no such
  node nothing is evicted (LowNodeUtilization.Balance).
- Each cycle takes the over nodes busiest first (sortNodesByUsage) and
  evicts at most one pod from each: the Prometheus usage client cannot tell
  a pod's share (usageclients.go, podUsage), and evictionLimits.node bounds
  it too. The next cycle reads the utilisation again: here, the node's
  traffic less the pods moved off it.
- The replacement goes where the webhook would steer it: the eligible node,
  other than the one it left, whose link it fills least once the pod's
  traffic is added (as scoring.mode link-utilization ranks).

Utilisation is the busiest selected direction over the link speed, as the
recording rule nettraffic:node_network_utilization:ratio computes it; a
node without a known link speed is measured against the slowest known one.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kubectl_nettraffic.rebalancing.eviction_rules import (
    EvictionPolicy,
    PodFacts,
    eviction_order,
    not_evictable,
    owner_counts,
)
from kubectl_nettraffic.scoring.node_scores import busiest_direction

MAX_CYCLES = 20  # a plan, not a simulation of the rest of the day


@dataclass(frozen=True)
class NodeLoad:
    name: str
    receive: float  # bytes/s
    transmit: float
    link_speed: float | None  # bytes/s; None: not reported
    eligible: bool  # the webhook may steer a pod here


@dataclass(frozen=True)
class PodLoad:
    facts: PodFacts
    receive: float  # bytes/s, the learner's per-pod rate
    transmit: float


@dataclass(frozen=True)
class PodStep:
    pod: PodLoad
    not_evictable: str | None
    order: int | None  # 1: the first the policy would evict from its node
    cycle: int | None  # the descheduler cycle that evicts it
    moves_to: str | None


@dataclass
class NodePlan:
    name: str
    utilization: float
    after: float
    pods: list[PodStep] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    nodes: tuple[NodePlan, ...]  # the nodes over ``high``, busiest first
    cycles: int
    destinations: int  # nodes under ``low`` when the plan starts
    note: str | None  # why nothing moves, when nothing does


def percent(utilization: float) -> int:
    """As the descheduler reads a sample: whole percent, truncated."""
    return int(utilization * 100)


class _Loads:
    """Each node's receive and transmit as pods move, and its utilisation."""

    def __init__(self, nodes: Sequence[NodeLoad], direction: str) -> None:
        known = [n.link_speed for n in nodes if n.link_speed]
        slowest = min(known) if known else None
        self.speed = {n.name: n.link_speed or slowest for n in nodes}
        self.rx = {n.name: n.receive for n in nodes}
        self.tx = {n.name: n.transmit for n in nodes}
        self.direction = direction

    def utilization(self, node: str, rx: float = 0.0, tx: float = 0.0) -> float:
        speed = self.speed[node]
        if not speed:
            return 0.0
        load = busiest_direction(
            max(0.0, self.rx[node] + rx), max(0.0, self.tx[node] + tx), self.direction
        )
        return min(1.0, load / speed)

    def move(self, pod: PodLoad, source: str, target: str) -> None:
        self.rx[source] -= pod.receive
        self.tx[source] -= pod.transmit
        self.rx[target] += pod.receive
        self.tx[target] += pod.transmit


def plan_rebalance(
    nodes: Sequence[NodeLoad],
    pods: Sequence[PodLoad],
    policy: EvictionPolicy,
    low: float,
    high: float,
    direction: str = "both",
) -> Plan:
    """``low`` and ``high``: percent, as the policy's thresholds and
    targetThresholds for MetricResource."""
    loads = _Loads(nodes, direction)
    if not any(loads.speed.values()):
        return Plan((), 0, 0, "no node reports a link speed, so no utilisation is known")
    start = {n.name: loads.utilization(n.name) for n in nodes}
    over = sorted((n for n in nodes if percent(start[n.name]) > high), key=lambda n: -start[n.name])
    under = [n for n in nodes if n.eligible and percent(start[n.name]) <= low]
    plans = {n.name: NodePlan(n.name, start[n.name], start[n.name]) for n in over}
    owners = owner_counts([p.facts for p in pods])
    queues: dict[str, list[PodLoad]] = {}
    for node_plan in plans.values():
        on_node = [p for p in pods if p.facts.node == node_plan.name]
        by_facts = {(p.facts.namespace, p.facts.name): p for p in on_node}
        reasons = {key: not_evictable(p.facts, policy, owners) for key, p in by_facts.items()}
        ordered = [
            by_facts[(f.namespace, f.name)] for f in eviction_order([p.facts for p in on_node])
        ]
        queues[node_plan.name] = [
            p for p in ordered if reasons[(p.facts.namespace, p.facts.name)] is None
        ]
        steps = {key: PodStep(p, reasons[key], None, None, None) for key, p in by_facts.items()}
        node_plan.pods = [steps[(p.facts.namespace, p.facts.name)] for p in ordered]
    note = None
    if not over:
        note = f"no node is above {high:g}%"
    elif not under:
        note = f"no node is at or below {low:g}% to take pods: the descheduler evicts nothing"
    cycles = 0
    while note is None and cycles < MAX_CYCLES:
        now = {n.name: loads.utilization(n.name) for n in nodes}
        hot = [name for name in plans if percent(now[name]) > high and queues[name]]
        if not hot or not any(n.eligible and percent(now[n.name]) <= low for n in nodes):
            break
        cycles += 1
        for name in sorted(hot, key=lambda n: -now[n]):
            pod = queues[name].pop(0)
            target = _steered(loads, nodes, pod, name)
            if target is None:
                continue
            loads.move(pod, name, target)
            node_plan = plans[name]
            order = 1 + sum(step.order is not None for step in node_plan.pods)
            node_plan.pods = [
                PodStep(s.pod, s.not_evictable, order, cycles, target) if s.pod is pod else s
                for s in node_plan.pods
            ]
    for node_plan in plans.values():
        node_plan.after = loads.utilization(node_plan.name)
    return Plan(tuple(plans[n.name] for n in over), cycles, len(under), note)


def _steered(loads: _Loads, nodes: Sequence[NodeLoad], pod: PodLoad, source: str) -> str | None:
    candidates = [n.name for n in nodes if n.eligible and n.name != source and loads.speed[n.name]]
    if not candidates:
        return None
    return min(candidates, key=lambda n: (loads.utilization(n, pod.receive, pod.transmit), n))


def pod_rates(
    samples: Mapping[tuple[str, str], tuple[float, float]], facts: Sequence[PodFacts]
) -> list[PodLoad]:
    """Join each pod's facts with its measured (receive, transmit); pods
    without a sample carry no measured traffic."""
    return [PodLoad(f, *samples.get((f.namespace, f.name), (0.0, 0.0))) for f in facts]
