"""A model of kube-scheduler's scoring, for the placement simulation.

Follows the default score plugins and weights of
pkg/scheduler/apis/config/v1/default_plugins.go (NodeAffinity 2,
PodTopologySpread 2, NodeResourcesFit 1, NodeResourcesBalancedAllocation 1;
TaintToleration, InterPodAffinity and ImageLocality are neutral here) and
each plugin's own normalisation:

- NodeAffinity (pkg/scheduler/framework/plugins/nodeaffinity): sum of the
  weights of matching preferred terms, normalised to 0..100 by the maximum
  over nodes (DefaultNormalizeScore, not reversed).
- PodTopologySpread (plugins/podtopologyspread/scoring.go) with the system
  default constraints (maxSkew 3 per kubernetes.io/hostname, 5 per
  topology.kubernetes.io/zone, ScheduleAnyway): per constraint
  ``count * log(domains + 2) + (maxSkew - 1)``, summed, then normalised as
  ``100 * (max + min - s) / max``, so nodes with fewer replicas of the same
  workload score higher.
- NodeResourcesFit, LeastAllocated (plugins/noderesources/least_allocated.go):
  mean over cpu and memory of ``(allocatable - requested) * 100 / allocatable``.
- NodeResourcesBalancedAllocation (plugins/noderesources/balanced_allocation.go):
  ``(1 - std(cpu fraction, memory fraction)) * 100``.

Ties between equal totals are broken at random, as selectHost does.
"""

import math
from dataclasses import dataclass, field

import numpy as np

WEIGHT_NODE_AFFINITY = 2
WEIGHT_TOPOLOGY_SPREAD = 2
WEIGHT_FIT = 1
WEIGHT_BALANCED = 1
MAX_SKEW_HOSTNAME = 3
MAX_SKEW_ZONE = 5


@dataclass
class ClusterState:
    cpu_allocatable: np.ndarray
    memory_allocatable: np.ndarray
    cpu_requested: np.ndarray
    memory_requested: np.ndarray
    zone: np.ndarray  # zone index per node
    # workload -> replicas per node
    replicas: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.cpu_allocatable)


def node_affinity_scores(preferred: dict[int, int], size: int) -> np.ndarray:
    raw = np.zeros(size)
    for index, weight in preferred.items():
        raw[index] += weight
    top = raw.max()
    return raw * 100.0 / top if top > 0 else raw


def topology_spread_scores(state: ClusterState, workload: str) -> np.ndarray:
    counts = state.replicas.get(workload)
    if counts is None:
        counts = np.zeros(state.size)
    zones = int(state.zone.max()) + 1
    per_zone = np.bincount(state.zone, weights=counts, minlength=zones)
    raw = (counts * math.log(state.size + 2) + (MAX_SKEW_HOSTNAME - 1)) + (
        per_zone[state.zone] * math.log(zones + 2) + (MAX_SKEW_ZONE - 1)
    )
    top, bottom = raw.max(), raw.min()
    if top == 0:
        return np.full(state.size, 100.0)
    return 100.0 * (top + bottom - raw) / top


def resource_scores(
    state: ClusterState, cpu: float, memory: float
) -> tuple[np.ndarray, np.ndarray]:
    cpu_fraction = np.minimum(1.0, (state.cpu_requested + cpu) / state.cpu_allocatable)
    memory_fraction = np.minimum(1.0, (state.memory_requested + memory) / state.memory_allocatable)
    least_allocated = ((1 - cpu_fraction) * 100 + (1 - memory_fraction) * 100) / 2
    balanced = (1 - np.abs(cpu_fraction - memory_fraction) / 2) * 100
    return least_allocated, balanced


def schedule(
    state: ClusterState,
    workload: str,
    cpu: float,
    memory: float,
    preferred: dict[int, int],
    rng: np.random.Generator,
) -> int:
    """Pick a node as kube-scheduler's default profile would, and bind the pod there."""
    fits = (state.cpu_requested + cpu <= state.cpu_allocatable) & (
        state.memory_requested + memory <= state.memory_allocatable
    )
    least, balanced = resource_scores(state, cpu, memory)
    total = (
        WEIGHT_NODE_AFFINITY * node_affinity_scores(preferred, state.size)
        + WEIGHT_TOPOLOGY_SPREAD * topology_spread_scores(state, workload)
        + WEIGHT_FIT * least
        + WEIGHT_BALANCED * balanced
    )
    total = np.where(fits, total, -np.inf)
    best = np.flatnonzero(total == total.max())
    chosen = int(rng.choice(best))
    state.cpu_requested[chosen] += cpu
    state.memory_requested[chosen] += memory
    state.replicas.setdefault(workload, np.zeros(state.size))[chosen] += 1
    return chosen
