"""Each workload's spread after a placement run: over zones and over nodes,
as the user's topology spread (kube-scheduler's default constraints: zone
maxSkew 5, hostname maxSkew 3) would see it, and the per-draw verdicts
against kube-scheduler alone on the same draw."""

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench.scheduler_model import MAX_SKEW_ZONE, ClusterState

# A workload of this many pods or more keeps a pod in every zone under
# kube-scheduler alone (its default zone spread), so losing one is harm.
# The goal, kept apart from scoring/spread.py's rule of the same
# value: the judge does not move when the product's rule does.
ZONE_KEEPING_PODS = 3
# How far a calm draw's figures may be above kube-scheduler alone's.
CALM_MARGIN = 0.5


@dataclass(frozen=True)
class WorkloadSpread:
    pods: int
    zone_skew: int  # its pods in its fullest zone less in its emptiest
    most_on_node: int  # its pods on its fullest node
    zones_missing: int  # zones with none of its pods
    workload: str = ""


def workload_spreads(state: ClusterState, workloads: Iterable[str]) -> list[WorkloadSpread]:
    """The spread of each of ``workloads`` that has a pod placed."""
    return spreads_of(state.zone, state.replicas, workloads)


def spreads_of(
    zone: np.ndarray, replicas: Mapping[str, np.ndarray], workloads: Iterable[str]
) -> list[WorkloadSpread]:
    """The spread of each of ``workloads`` that has a pod placed, from its
    pods per node (``replicas``) and each node's zone."""
    zones = int(zone.max()) + 1
    spreads = []
    for workload in sorted(workloads):
        counts = replicas.get(workload)
        if counts is None or counts.sum() <= 0:
            continue
        per_zone = np.bincount(zone, weights=counts, minlength=zones)
        spreads.append(
            WorkloadSpread(
                int(counts.sum()),
                int(per_zone.max() - per_zone.min()),
                int(counts.max()),
                int((per_zone == 0).sum()),
                workload,
            )
        )
    return spreads


@dataclass(frozen=True)
class SpreadSummary:
    """One draw's (or the mean over draws') spread of its workloads."""

    zone_skew: float  # mean over the workloads
    past_skew: float  # share of the workloads past zone maxSkew 5
    most_on_node: float  # mean over the workloads
    lost_zone: float  # share of the workloads of 3 pods or more missing a zone

    @classmethod
    def of(cls, spreads: Sequence[WorkloadSpread]) -> "SpreadSummary":
        if not spreads:
            return cls(0.0, 0.0, 0.0, 0.0)
        keeping = [s for s in spreads if s.pods >= ZONE_KEEPING_PODS]
        return cls(
            statistics.mean(s.zone_skew for s in spreads),
            sum(s.zone_skew > MAX_SKEW_ZONE for s in spreads) / len(spreads),
            statistics.mean(s.most_on_node for s in spreads),
            sum(s.zones_missing > 0 for s in keeping) / len(keeping) if keeping else 0.0,
        )

    @classmethod
    def mean(cls, draws: Sequence["SpreadSummary"]) -> "SpreadSummary":
        return cls(*(statistics.mean(getattr(d, f) for d in draws) for f in cls.__annotations__))


def spread_kept(ours: SpreadSummary, alone: SpreadSummary, calm: bool) -> bool:
    """One draw's verdict against kube-scheduler alone on it: no more
    workloads past zone skew 5, none more missing a zone; in a calm
    cluster, also zone skew and pods per node within CALM_MARGIN."""
    kept = ours.past_skew <= alone.past_skew and ours.lost_zone <= alone.lost_zone
    if calm:
        kept = (
            kept
            and ours.zone_skew <= alone.zone_skew + CALM_MARGIN
            and ours.most_on_node <= alone.most_on_node + CALM_MARGIN
        )
    return kept
