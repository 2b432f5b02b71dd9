"""What the descheduler would move off hot nodes, and where the webhook
would steer each replacement: the plan ``kubectl nettraffic rebalance`` shows.

Pure: nodes (traffic, link speed, readiness), pods (rates, eviction facts)
and the policy's thresholds in, a plan out. Each cycle is the descheduler's
as low_node_utilization.py models it (shared with the rebalancing
benchmark): the nodes read as whole percent, classified, and up to
``evictionLimits.node`` pods evicted from each over node, busiest node first,
without measuring again in between. The next cycle reads the utilisation
again: here, the node's traffic less the pods moved off it.

The replacement goes where the webhook would steer it: the eligible node,
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
from kubectl_nettraffic.rebalancing.low_node_utilization import (
    NodeSample,
    Thresholds,
    classify,
    victims,
)
from kubectl_nettraffic.scoring.node_scores import busiest_direction

MAX_CYCLES = 20  # a plan, not a simulation of the rest of the day


@dataclass(frozen=True)
class NodeLoad:
    name: str
    receive: float | None  # bytes/s; None: no traffic series, so no sample
    transmit: float | None
    link_speed: float | None  # bytes/s; None: not reported
    eligible: bool  # the webhook may steer a pod here
    ready: bool = True  # as the descheduler reads it (low_node_utilization.descheduler_ready)
    schedulable: bool = True


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
    nodes: tuple[NodePlan, ...]  # the Ready nodes over ``high``, busiest first
    cycles: int
    destinations: int  # nodes under ``low`` when the plan starts
    note: str | None  # why nothing moves, when nothing does


class _Loads:
    """Each node's receive and transmit as pods move, and its utilisation."""

    def __init__(self, nodes: Sequence[NodeLoad], direction: str) -> None:
        known = [n.link_speed for n in nodes if n.link_speed]
        slowest = min(known) if known else None
        self.speed = {n.name: n.link_speed or slowest for n in nodes}
        self.rx = {n.name: n.receive or 0.0 for n in nodes}
        self.tx = {n.name: n.transmit or 0.0 for n in nodes}
        self.sampled = {n.name for n in nodes if n.receive is not None}
        self.direction = direction

    def utilization(self, node: str, rx: float = 0.0, tx: float = 0.0) -> float:
        speed = self.speed[node]
        if not speed:
            return 0.0
        load = busiest_direction(
            max(0.0, self.rx[node] + rx), max(0.0, self.tx[node] + tx), self.direction
        )
        return min(1.0, load / speed)

    def samples(self, nodes: Sequence[NodeLoad]) -> list[NodeSample]:
        """What the recording rule answers for each node now."""
        return [
            NodeSample(
                n.name,
                self.utilization(n.name) if n.name in self.sampled else None,
                n.ready,
                n.schedulable,
            )
            for n in nodes
        ]

    def move(self, pod: PodLoad, source: str, target: str) -> None:
        self.rx[source] -= pod.receive
        self.tx[source] -= pod.transmit
        self.rx[target] += pod.receive
        self.tx[target] += pod.transmit


def plan_rebalance(
    nodes: Sequence[NodeLoad],
    pods: Sequence[PodLoad],
    policy: EvictionPolicy,
    thresholds: Thresholds,
    direction: str = "both",
) -> Plan:
    loads = _Loads(nodes, direction)
    if not any(loads.speed.values()):
        return Plan((), 0, 0, "no node reports a link speed, so no utilisation is known")
    samples = loads.samples(nodes)
    first = classify(samples, thresholds)
    # The hot nodes are shown even when a missing sample stops the cycle.
    sampled = {s.name: s.sample for s in samples if s.sample is not None}
    hot = classify([s for s in samples if s.sample is not None], thresholds).over
    plans = {name: NodePlan(name, sampled[name], sampled[name]) for name in hot}
    owners = owner_counts([p.facts for p in pods])
    by_name = sorted(pods, key=lambda p: (p.facts.namespace, p.facts.name))
    loads_of = {p.facts: p for p in pods}
    on_node = {name: [p.facts for p in by_name if p.facts.node == name] for name in plans}
    for name, node_plan in plans.items():
        node_plan.pods = [
            PodStep(loads_of[f], not_evictable(f, policy, owners), None, None, None)
            for f in eviction_order(on_node[name])
        ]
    evicted: set[PodFacts] = set()
    cycles = 0
    classification = first
    while classification.idle is None and cycles < MAX_CYCLES:
        remaining = {
            name: [f for f in facts if f not in evicted] for name, facts in on_node.items()
        }
        chosen = victims(
            [n for n in classification.over if n in plans],
            remaining,
            policy,
            owners,
            thresholds.evictions_per_node,
        )
        if not chosen:
            break
        cycles += 1
        for name, facts in chosen.items():
            for f in facts:
                evicted.add(f)
                pod = loads_of[f]
                target = _steered(loads, nodes, pod, name)
                if target is not None:
                    loads.move(pod, name, target)
                node_plan = plans[name]
                order = 1 + sum(step.order is not None for step in node_plan.pods)
                node_plan.pods = [
                    PodStep(s.pod, s.not_evictable, order, cycles, target) if s.pod is pod else s
                    for s in node_plan.pods
                ]
        classification = classify(loads.samples(nodes), thresholds)
    for node_plan in plans.values():
        node_plan.after = loads.utilization(node_plan.name)
    return Plan(tuple(plans.values()), cycles, len(first.under), first.idle)


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
