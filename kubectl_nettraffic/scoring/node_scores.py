"""Pure scoring: nodes + measurements -> ranked NodeScore list.

Formula. For every node ``i`` and every component ``k`` with data:

    x_net(i) = max(load(i) / max_j load(j),   mode "traffic"; the load term is 0 for
                   min(1, util(i)))           all when every node is idle (no division
                                              by zero); util only where the node's
                                              link speed is known
    x_net(i) = min(1, util(i))                mode "link-utilization"
    x_cpu(i) = cpu usage / allocatable cpu
    x_mem(i) = memory usage / allocatable memory

    score(i) = 100 * sum_k w_k * (1 - x_k(i)) / sum_k w_k,   clamped to 0..100

where util = busiest direction / link speed. Traffic mode ranks by bytes/s,
but never as quieter than the node's own link says: a 1 Gbit/s node carrying
100 MB/s is 80% full however little that is next to a 25 Gbit/s node. On
equal links, while the busiest node's load is below the link speed, the load
term is the larger for every node, so the ranking there is plain bytes/s.

``load`` is receive, transmit or their sum (``prometheus.direction``). A node
with no component that has both data and a weight above zero has no data: it
gets score 0, a reason, and ranks after every node with data. When traffic is
missing altogether (metrics-server fallback) and neither cpu nor memory has a
weight, cpu and memory get weight 1 each so the fallback still ranks.

Load added after the measurement (pods steered since, see scoreboard) lowers
the network part linearly: ``score - penalty_per_byte * extra``, with
``penalty_per_byte = 100 * w_net / sum_k w_k / scale`` and scale = the max
load (traffic mode) or the node's link speed (link-utilization mode). The
unclamped value is kept for ranking so bursts keep spreading past zero. In
traffic mode, a node with a known link speed below the max load uses its
link speed as the scale: each byte fills that link faster than the load term
says (the steeper of the two terms' slopes, so the linear estimate never
scores a node above what the formula would give it with the extra load).

Ranking: eligible before ineligible, data before no data, higher score,
lower traffic, then name, so equal inputs always give the same order.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, Protocol

from kubectl_nettraffic.config import ScoringSettings, Weights
from kubectl_nettraffic.kube.nodes import Node, ineligibility
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.scoring.readings import NodeTraffic, NodeUsage


@dataclass(frozen=True, slots=True)
class NodeScore:
    name: str
    receive: float | None  # bytes/s
    transmit: float | None  # bytes/s
    traffic: float | None  # bytes/s in the configured direction(s)
    link_speed: float | None  # bytes/s
    link_utilization: float | None  # 0..1+
    cpu_ratio: float | None
    memory_ratio: float | None
    score: float  # 0..100 before in-flight load; higher is better
    penalty_per_byte: float  # score lost per byte/s of extra load
    eligible: bool
    has_data: bool
    reason: str | None

    def score_with(self, extra_load: float) -> float:
        """Score once ``extra_load`` bytes/s more land here (unclamped)."""
        return self.score - self.penalty_per_byte * extra_load

    def __reduce__(self) -> tuple[type["NodeScore"], tuple[Any, ...]]:
        """Pickled as a constructor call with the field values in order.

        The refresher process sends every node's score to the serving process
        on each refresh (refresher_process). What dataclasses give a frozen
        class with slots instead restores each object by calling ``fields()``
        and setting every field one by one, all in Python: nine tenths of
        loading a message, which the serving process does under the GIL its
        admissions need (python -m bench.engine times the load)."""
        return (NodeScore, tuple([getattr(self, name) for name in _NODE_SCORE_FIELDS]))


_NODE_SCORE_FIELDS = tuple(field.name for field in fields(NodeScore))


class Directions(Protocol):
    """Anything with receive and transmit rates: a node's traffic, a pod's sample."""

    @property
    def receive(self) -> float: ...
    @property
    def transmit(self) -> float: ...


def directional_load(traffic: Directions, direction: str) -> float:
    """Bytes/s in ``direction`` (prometheus.direction: receive, transmit or both)."""
    if direction == "receive":
        return traffic.receive
    if direction == "transmit":
        return traffic.transmit
    return traffic.receive + traffic.transmit


def busiest_direction(receive: float, transmit: float, direction: str) -> float:
    """Bytes/s in the busier selected direction: NICs are full duplex, so a
    link fills one direction at a time."""
    if direction == "receive":
        return receive
    if direction == "transmit":
        return transmit
    return max(receive, transmit)


def link_utilization(traffic: NodeTraffic, direction: str, speed: float | None) -> float | None:
    """Busiest selected direction over link speed."""
    if not speed:
        return None
    return busiest_direction(traffic.receive, traffic.transmit, direction) / speed


def effective_weights(weights: Weights, have_traffic: bool) -> Weights:
    if have_traffic:
        return weights
    if weights.cpu + weights.memory > 0:
        return Weights(network=0.0, cpu=weights.cpu, memory=weights.memory)
    return Weights(network=0.0, cpu=1.0, memory=1.0)


def _ratio(usage: float | None, allocatable: float | None) -> float | None:
    if usage is None or not allocatable:
        return None
    return usage / allocatable


def rank_key(score: NodeScore, extra: float = 0.0) -> tuple[bool, bool, float, float, str]:
    return (
        not score.eligible,
        not score.has_data,
        -score.score_with(extra),
        score.traffic if score.traffic is not None else float("inf"),
        score.name,
    )


def _network_term(
    load: float,
    utilization: float | None,
    speed: float | None,
    link_mode: bool,
    scale: float,
    max_load: float,
) -> tuple[float, float]:
    """The network term's x (0 idle .. 1 busiest) and the bytes/s that take
    it from 0 to 1 (the penalty's scale), as the module doc says."""
    if link_mode and utilization is not None and speed:
        return min(1.0, utilization), speed
    # An idle cluster (max 0) puts every node at 100; a pod added there
    # still costs something (``scale``) so bursts spread.
    x = load / max_load if max_load else 0.0
    if utilization is not None and speed:
        return max(x, min(1.0, utilization)), min(scale, speed)
    return x, scale


def _weighted(
    components: Sequence[tuple[float, float]], network_weight: float, penalty_scale: float
) -> tuple[float, float, bool]:
    """(score, penalty per byte/s, whether any term had data) of the
    weighted terms (weight, x), as the module doc says."""
    total_weight = sum(w for w, _ in components)
    if total_weight <= 0:
        return 0.0, 0.0, False
    raw = 100.0 * sum(w * (1.0 - x) for w, x in components) / total_weight
    # Below 1 byte/s a scale is idle for every purpose; a subnormal one
    # would make the penalty infinite, and inf * 0 extra load NaN.
    share = network_weight / total_weight
    penalty = 100.0 * share / max(penalty_scale, 1.0) if penalty_scale else 0.0
    return min(100.0, max(0.0, raw)), penalty, True


def score_nodes(
    nodes: Sequence[Node],
    traffic: Mapping[str, NodeTraffic] | None,
    usage: Mapping[str, NodeUsage] | None,
    settings: ScoringSettings,
    direction: str,
    selector: LabelSelector,
    idle_scale: float = float(2**20),
    no_traffic_reason: str = "no traffic series for this node",
) -> list[NodeScore]:
    """Score every node and return them ranked, best first (see module doc).

    ``idle_scale`` (bytes/s) stands in for the max load when every node is
    idle, so that in-flight pods still lower a node's score.
    """
    have_traffic = traffic is not None
    weights = effective_weights(settings.weights, have_traffic)
    traffic = traffic or {}
    usage = usage or {}
    loads = {name: directional_load(t, direction) for name, t in traffic.items()}
    max_load = max(loads.values(), default=0.0)
    known_speeds = [t.link_speed for t in traffic.values() if t.link_speed]
    link_mode = settings.mode == "link-utilization" and bool(known_speeds)
    assumed_speed = min(known_speeds) if known_speeds else None

    scored = []
    for node in nodes:
        measured = traffic.get(node.name)
        node_usage = usage.get(node.name)
        cpu = _ratio(node_usage.cpu if node_usage else None, node.allocatable_cpu)
        memory = _ratio(node_usage.memory if node_usage else None, node.allocatable_memory)
        notes: list[str] = []
        utilization = None
        components: list[tuple[float, float]] = []  # (weight, x)
        penalty_scale = 0.0
        if measured is not None:
            speed = measured.link_speed
            if link_mode and not speed:
                speed = assumed_speed
                notes.append(
                    f"link speed unknown; assumed the slowest known, {assumed_speed:g} B/s"
                )
            utilization = link_utilization(measured, direction, speed)
            if weights.network > 0:
                x, penalty_scale = _network_term(
                    loads[node.name],
                    utilization,
                    speed,
                    link_mode,
                    max_load or idle_scale,
                    max_load,
                )
                components.append((weights.network, x))
        elif have_traffic and weights.network > 0:
            notes.append(no_traffic_reason)
        if weights.cpu > 0 and cpu is not None:
            components.append((weights.cpu, min(1.0, cpu)))
        if weights.memory > 0 and memory is not None:
            components.append((weights.memory, min(1.0, memory)))

        network = weights.network if measured is not None else 0.0
        score, penalty, has_data = _weighted(components, network, penalty_scale)
        if not has_data and not notes:
            notes.append("no cpu/memory usage from metrics-server for this node")
        blocked = ineligibility(node, selector)
        reason = "; ".join([blocked] if blocked else notes) or None
        scored.append(
            NodeScore(
                name=node.name,
                receive=measured.receive if measured else None,
                transmit=measured.transmit if measured else None,
                traffic=loads.get(node.name),
                link_speed=measured.link_speed if measured else None,
                link_utilization=utilization,
                cpu_ratio=cpu,
                memory_ratio=memory,
                score=score,
                penalty_per_byte=penalty,
                eligible=blocked is None,
                has_data=has_data,
                reason=reason,
            )
        )
    scored.sort(key=rank_key)
    return scored
