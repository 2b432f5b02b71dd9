"""A model of kube-scheduler's default profile, for the placement simulation.

Each rule follows the upstream function it names (kubernetes/kubernetes,
pkg/scheduler/...), in integers where the scheduler counts in integers:

Which nodes are scored
- ``num_feasible_nodes_to_find`` (the product's own, in
  kubectl_nettraffic/scoring/scheduler_sample.py, which needs the same
  count): schedule_one.go, numFeasibleNodesToFind.
  Below 100 nodes every node; else max(50 - n/125, 5) percent of them, never
  fewer than 100 (500 -> 230, 5,000 -> 500, 20,000 -> 1,000).
- ``KubeScheduler.schedule``: schedule_one.go, findNodesThatPassFilters and
  findNodesThatFitPod. Filtering starts at ``next_start_node_index``, walks
  the nodes in order and stops once that many feasible nodes are found; the
  index then moves on by the nodes examined (feasible or not), modulo the
  node count. Preferred node affinity does not narrow the walk (only a
  PreFilter result does, from required terms).
- Filter: NodeResourcesFit (noderesources/fit.go): the pod's cpu and memory
  requests fit beside what the node's pods request.
- No feasible node: the pod stays Pending (schedulePod's FitError; PostFilter
  preemption finds no victims among pods of equal priority). One feasible
  node: it is chosen without scoring (schedulePod).

How they are scored (weights from apis/config/v1/default_plugins.go), each
plugin normalised over the scored nodes only
- NodeAffinity 2 (nodeaffinity/node_affinity.go, Score and NormalizeScore):
  the sum of the weights of matching preferred terms, then
  ``default_normalize_score`` (helper/normalize_score.go, DefaultNormalizeScore):
  ``MaxNodeScore * score / max`` in integers.
- PodTopologySpread 2 (podtopologyspread/scoring.go, initPreScoreState, Score,
  NormalizeScore) with the system default constraints (plugin.go:
  maxSkew 3 per kubernetes.io/hostname, 5 per topology.kubernetes.io/zone,
  ScheduleAnyway): per constraint ``count * log(size + 2) + (maxSkew - 1)``,
  where size is the number of scored nodes for hostname and the number of
  zones among them for zone, and a zone's count is over every node of it;
  summed and rounded; then ``MaxNodeScore * (max + min - s) / max``.
  The pods counted are those of the group the caller names (``workload``):
  the system defaults select by helper/spread.go, DefaultSelector, which
  adds the pod's ReplicaSet's selector, so a Deployment's pods count per
  ReplicaSet (pod-template-hash) and a rollout's new pods spread among
  themselves; a constraint of the pod's own, by its labelSelector.
  A pod that carries constraints of its own is scored by those instead of
  the defaults (podtopologyspread, getConstraints: the defaults only for a
  pod with none): ``zone_spread=False`` stands for pods that carry the
  hostname one alone; ``zone_max_skew`` for pods that carry it and a zone
  constraint with ``whenUnsatisfiable: DoNotSchedule``, a filter only
  (``zone_skew_allows``; scoring counts ScheduleAnyway constraints alone).
- NodeResourcesFit 1, LeastAllocated (noderesources/least_allocated.go,
  leastResourceScorer): per resource ``(capacity - requested) * 100 /
  capacity`` in integers, the pod included, averaged with equal weights.
- NodeResourcesBalancedAllocation 1 (noderesources/balanced_allocation.go,
  balancedResourceScorer): with fractions f of cpu and memory (pod included,
  capped at 1) and std = |f_cpu - f_mem| / 2,
  - up to v1.35: ``(1 - std) * 100``;
  - from v1.36 (kubernetes/kubernetes#135573: it scores the change in balance
    the pod causes): 75 for no change, 50 from perfectly balanced to perfectly
    unbalanced, 100 the other way. Modelled as ``(0.75 + (std_before -
    std_after) / 2) * 100``, the linear rule through those three points as
    the pull request describes them (its code was not available to check).
- TaintToleration 3, InterPodAffinity 2 and ImageLocality 1 are the same on
  every node under the benchmark's pods (no PreferNoSchedule taints, no pod
  affinity terms, images on no node): constant offsets, left out.
- selectHost (schedule_one.go): the highest total, ties broken uniformly at
  random.

Limits: filtering is walked in order, where the scheduler checks nodes in
parallel and may examine a few more before it stops; no pod count limit per
node, no volumes, no nominated nodes, no extenders.
"""

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubectl_nettraffic.kube.pods import PREFERRED
from kubectl_nettraffic.scoring.scheduler_sample import num_feasible_nodes_to_find

MAX_NODE_SCORE = 100

WEIGHT_NODE_AFFINITY = 2
WEIGHT_TOPOLOGY_SPREAD = 2
WEIGHT_FIT = 1
WEIGHT_BALANCED = 1
MAX_SKEW_HOSTNAME = 3
MAX_SKEW_ZONE = 5

MILLICORES = 1000
GIB = 2**30


@dataclass
class ClusterState:
    cpu_allocatable: np.ndarray  # cores
    memory_allocatable: np.ndarray  # GiB
    cpu_requested: np.ndarray
    memory_requested: np.ndarray
    zone: np.ndarray  # zone index per node
    # workload -> replicas per node
    replicas: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.cpu_allocatable)

    def fits(self, cpu: float, memory: float) -> np.ndarray:
        """NodeResourcesFit's filter, per node."""
        return (self.cpu_requested + cpu <= self.cpu_allocatable) & (
            self.memory_requested + memory <= self.memory_allocatable
        )

    def bind(self, node: int, workload: str, cpu: float, memory: float) -> None:
        self.cpu_requested[node] += cpu
        self.memory_requested[node] += memory
        self.replicas.setdefault(workload, np.zeros(self.size))[node] += 1

    def unbind(self, node: int, workload: str, cpu: float, memory: float) -> None:
        """The pod is gone (evicted): its requests and replica count leave the node."""
        counts = self.replicas.get(workload)
        if counts is None or counts[node] < 1:
            raise ValueError(f"no pod of {workload!r} is bound to node {node}")
        self.cpu_requested[node] -= cpu
        self.memory_requested[node] -= memory
        self.replicas[workload][node] -= 1


def default_normalize_score(raw: np.ndarray, reverse: bool = False) -> np.ndarray:
    """DefaultNormalizeScore: scale to 0..MaxNodeScore by the maximum, in integers."""
    scores = raw.astype(np.int64)
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return np.full(len(scores), MAX_NODE_SCORE if reverse else 0, dtype=np.int64)
    scaled = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


def node_affinity_scores(
    preferred: dict[int, int], scored: np.ndarray, label_weights: np.ndarray | None = None
) -> np.ndarray:
    """Preferred one-node terms ({node: weight}) plus terms on node labels
    (``label_weights``: per node, the weights of the label terms it matches),
    over the scored nodes. A node's raw score is the sum of the weights of
    the terms it matches (nodeaffinity/node_affinity.go, NodeAffinity.Score:
    ``count += int64(term.Weight)`` per matching preferred term)."""
    raw = np.array([preferred.get(int(i), 0) for i in scored], dtype=np.int64)
    if label_weights is not None:
        raw = raw + label_weights[scored].astype(np.int64)
    return default_normalize_score(raw)


def zone_skew_allows(state: ClusterState, workload: str, max_skew: int) -> np.ndarray:
    """PodTopologySpread's filter for a zone constraint with
    ``whenUnsatisfiable: DoNotSchedule`` (podtopologyspread/filtering.go,
    Filter): a node passes when its zone's pods of the workload, plus this
    one, less the fewest in any zone, are at most ``max_skew``. Every node
    carries a zone, so every zone is a domain."""
    counts = state.replicas.get(workload)
    per_zone = np.bincount(
        state.zone,
        weights=np.zeros(state.size) if counts is None else counts,
        minlength=int(state.zone.max()) + 1,
    )
    return per_zone[state.zone] + 1 - per_zone.min() <= max_skew


def topology_spread_scores(
    state: ClusterState, workload: str, scored: np.ndarray, zone_spread: bool = True
) -> np.ndarray:
    counts = state.replicas.get(workload)
    if counts is None:
        counts = np.zeros(state.size)
    zones_scored = np.unique(state.zone[scored])
    per_zone = np.bincount(state.zone, weights=counts, minlength=int(state.zone.max()) + 1)
    hostname_weight = math.log(len(scored) + 2)
    zone_weight = math.log(len(zones_scored) + 2)
    raw = counts[scored] * hostname_weight + (MAX_SKEW_HOSTNAME - 1)
    if zone_spread:
        raw = raw + per_zone[state.zone[scored]] * zone_weight + (MAX_SKEW_ZONE - 1)
    # Go's math.Round rounds halves away from zero; the values are positive.
    rounded = np.floor(raw + 0.5).astype(np.int64)
    top, bottom = int(rounded.max()), int(rounded.min())
    if top == 0:
        return np.full(len(scored), MAX_NODE_SCORE, dtype=np.int64)
    return MAX_NODE_SCORE * (top + bottom - rounded) // top


def _integer_resources(
    state: ClusterState, scored: np.ndarray, cpu: float, memory: float, with_pod: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(cpu requested, cpu allocatable, memory requested, memory allocatable) in
    millicores and bytes, as the scheduler counts them."""
    extra = 1 if with_pod else 0
    cpu_requested = np.round((state.cpu_requested[scored] + extra * cpu) * MILLICORES)
    memory_requested = np.round((state.memory_requested[scored] + extra * memory) * GIB)
    return (
        cpu_requested.astype(np.int64),
        np.round(state.cpu_allocatable[scored] * MILLICORES).astype(np.int64),
        memory_requested.astype(np.int64),
        np.round(state.memory_allocatable[scored] * GIB).astype(np.int64),
    )


def least_allocated_scores(
    state: ClusterState, scored: np.ndarray, cpu: float, memory: float
) -> np.ndarray:
    cpu_requested, cpu_capacity, memory_requested, memory_capacity = _integer_resources(
        state, scored, cpu, memory, with_pod=True
    )

    def least_requested(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
        free = np.where(requested > capacity, 0, capacity - requested)
        return free * MAX_NODE_SCORE // capacity

    return (
        least_requested(cpu_requested, cpu_capacity)
        + least_requested(memory_requested, memory_capacity)
    ) // 2


def _imbalance(
    cpu_requested: np.ndarray,
    cpu_capacity: np.ndarray,
    memory_requested: np.ndarray,
    memory_capacity: np.ndarray,
) -> np.ndarray:
    cpu_fraction = np.minimum(1.0, cpu_requested / cpu_capacity)
    memory_fraction = np.minimum(1.0, memory_requested / memory_capacity)
    return np.abs(cpu_fraction - memory_fraction) / 2


def balanced_allocation_scores(
    state: ClusterState, scored: np.ndarray, cpu: float, memory: float, rule: str = "v1.36"
) -> np.ndarray:
    after = _imbalance(*_integer_resources(state, scored, cpu, memory, with_pod=True))
    if rule == "v1.35":
        return ((1 - after) * MAX_NODE_SCORE).astype(np.int64)
    if rule != "v1.36":
        raise ValueError(f"balanced allocation rule {rule!r}: use v1.36 or v1.35")
    before = _imbalance(*_integer_resources(state, scored, cpu, memory, with_pod=False))
    return ((0.75 + (before - after) / 2) * MAX_NODE_SCORE).astype(np.int64)


class KubeScheduler:
    """One scheduler profile: its rotating start index survives between pods."""

    def __init__(
        self,
        state: ClusterState,
        rng: np.random.Generator,
        balanced_rule: str = "v1.36",
        percentage_of_nodes_to_score: int = 0,
        zone_spread: bool = True,  # False: pods spread per hostname only
        zone_max_skew: int | None = None,  # pods also carry a zone DoNotSchedule constraint
    ) -> None:
        self.state, self.rng = state, rng
        self.zone_spread = zone_spread and zone_max_skew is None
        self.zone_max_skew = zone_max_skew
        self.balanced_rule = balanced_rule
        self.percentage = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        self.last_scored = np.zeros(0, dtype=np.int64)  # the nodes the last pod was scored on

    def feasible_sample(self, cpu: float, memory: float, workload: str = "") -> np.ndarray:
        """The feasible nodes the scheduler finds for a pod, in the order it finds them."""
        size = self.state.size
        wanted = num_feasible_nodes_to_find(size, self.percentage)
        order = (self.next_start_node_index + np.arange(size)) % size
        feasible = self.state.fits(cpu, memory)
        if self.zone_max_skew is not None:
            feasible &= zone_skew_allows(self.state, workload, self.zone_max_skew)
        feasible_in_order = np.flatnonzero(feasible[order])
        found = feasible_in_order[:wanted]
        processed = int(found[-1]) + 1 if len(found) == wanted else size
        self.next_start_node_index = (self.next_start_node_index + processed) % size
        return order[found]

    def schedule(
        self,
        workload: str,
        cpu: float,
        memory: float,
        preferred: dict[int, int],
        label_weights: np.ndarray | None = None,
    ) -> int | None:
        """The node the pod is bound to, or None: it stays Pending."""
        chosen = self._pick(workload, cpu, memory, preferred, label_weights)
        if chosen is not None:
            self.state.bind(chosen, workload, cpu, memory)
        return chosen

    def would_pick(self, workload: str, cpu: float, memory: float) -> int | None:
        """The node a pod without preferred terms would be bound to now,
        its tie drawn as the next ``schedule`` draws it; nothing changes
        (the bindings, the sample's start, the tie draw)."""
        start, rng, scored = self.next_start_node_index, self.rng, self.last_scored
        self.rng = copy.deepcopy(rng)
        try:
            return self._pick(workload, cpu, memory, {}, None)
        finally:
            self.next_start_node_index, self.rng, self.last_scored = start, rng, scored

    def _pick(
        self,
        workload: str,
        cpu: float,
        memory: float,
        preferred: dict[int, int],
        label_weights: np.ndarray | None,
    ) -> int | None:
        scored = self.feasible_sample(cpu, memory, workload)
        self.last_scored = scored
        if len(scored) == 0:
            return None
        if len(scored) == 1:
            return int(scored[0])
        total = (
            WEIGHT_NODE_AFFINITY * node_affinity_scores(preferred, scored, label_weights)
            + WEIGHT_TOPOLOGY_SPREAD
            * topology_spread_scores(self.state, workload, scored, self.zone_spread)
            + WEIGHT_FIT * least_allocated_scores(self.state, scored, cpu, memory)
            + WEIGHT_BALANCED
            * balanced_allocation_scores(self.state, scored, cpu, memory, self.balanced_rule)
        )
        best = scored[total == total.max()]
        return int(self.rng.choice(best))


def node_affinity_terms(
    pod: dict[str, Any], node_labels: list[dict[str, str]]
) -> tuple[dict[int, int], np.ndarray]:
    """What kube-scheduler's NodeAffinity scores from the patched pod's
    preferred terms: one-node terms by node index, and per node the weights
    of the label terms it matches (nodeaffinity/node_affinity.go, Score;
    ``In`` and ``NotIn`` as apimachinery pkg/labels/selector.go's
    Requirement.Matches reads them: NotIn matches a node without the label;
    a label term's ``metadata.name NotIn`` fields leave those nodes out,
    ANDed as component-helpers' nodeaffinity.go ``nodeSelectorTerm.match``
    does)."""
    preferred: dict[int, int] = {}
    weights = np.zeros(len(node_labels), dtype=np.int64)
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    for term in affinity.get(PREFERRED) or []:
        preference = term["preference"]
        fields_ = preference.get("matchFields") or []
        expressions = preference.get("matchExpressions") or []
        if not expressions:
            for field_ in fields_:
                assert field_["operator"] == "In", term
                for name in field_["values"]:
                    node = int(name.removeprefix("node-"))
                    preferred[node] = preferred.get(node, 0) + term["weight"]
            continue
        left_out = set()
        for field_ in fields_:
            assert field_["operator"] == "NotIn", term
            left_out.update(int(name.removeprefix("node-")) for name in field_["values"])
        for node, labels in enumerate(node_labels):
            if node not in left_out and all(_matches(labels, e) for e in expressions):
                weights[node] += term["weight"]
    return preferred, weights


def _matches(labels: dict[str, str], expression: dict[str, Any]) -> bool:
    """One node selector requirement, as Requirement.Matches reads it."""
    found = labels.get(expression["key"]) in expression["values"]
    if expression["operator"] not in ("In", "NotIn"):
        raise ValueError(f"the scheduler model reads no such operator: {expression}")
    return found if expression["operator"] == "In" else not found
