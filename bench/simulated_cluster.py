"""The placement simulation's cluster: its nodes drawn (background
traffic, link speeds, requests and zones), the pods placed on them, what
Prometheus would measure of them, and what kube-scheduler's NodeAffinity
reads off an admitted pod."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.placement_scenarios import Scenario
from bench.scheduler_model import ClusterState
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.tier_weights import TIER_NAMES
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.sources.prometheus import TrafficReport

WINDOW = 120.0  # prometheus.window


@dataclass
class Placed:
    node: int
    traffic: float
    start: float  # when it starts sending
    workload: Workload | None = None
    created: float = 0.0  # its admission


def scheduled_terms(
    pod: dict[str, Any], index: dict[str, int], tier_codes: np.ndarray, zones: np.ndarray
) -> tuple[dict[int, int], np.ndarray]:
    """What kube-scheduler's NodeAffinity reads from the pod as admitted
    (the webhook's patch applied): each node's weight from the one-node
    terms, and from the terms on the traffic-tier label as the nodes carry
    it now (``tier_codes``: 0 for none, else 1 + its place in TIER_NAMES), with
    the zones they leave out (``zones``: each node's zone, which its zone
    copy holds once it has a tier: the writer PATCHes both at once) and the
    nodes they leave out by name (matchFields NotIn, ANDed with the labels:
    component-helpers' nodeaffinity.go, ``nodeSelectorTerm.match``)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    terms = (affinity.get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    preferred: dict[int, int] = {}
    weights = np.zeros(len(tier_codes), dtype=np.int64)
    for term in terms:
        weight, preference = int(term["weight"]), term["preference"]
        fields = preference.get("matchFields") or []
        expressions = preference.get("matchExpressions") or []
        if len(fields) == 1 and not expressions and fields[0]["key"] == "metadata.name":
            assert fields[0]["operator"] == "In", term
            for name in fields[0]["values"]:
                preferred[index[name]] = preferred.get(index[name], 0) + weight
        elif expressions and expressions[0]["key"] == TIER_LABEL:
            tiers, *outside = expressions
            assert tiers["operator"] == "In", term
            matches = np.isin(tier_codes, [1 + TIER_NAMES.index(tier) for tier in tiers["values"]])
            for zone in outside:  # a node without a tier has no zone copy: no match anyway
                assert zone["key"] == ZONE_COPY_LABEL and zone["operator"] == "NotIn", term
                matches &= ~np.isin(zones, zone["values"])
            for left_out in fields:  # the nodes booked since the measurement, by name
                assert left_out["key"] == "metadata.name" and left_out["operator"] == "NotIn", term
                (name,) = left_out["values"]
                matches[index[name]] = False
            weights += weight * matches
        else:
            raise ValueError(f"the scheduler model reads no such term: {term}")
    return preferred, weights


class MeasuredTraffic:
    """A Prometheus stand-in for the simulation: rate() over the window, as of the sim clock."""

    def __init__(
        self,
        background: np.ndarray,
        links: np.ndarray,
        names: list[str],
        clock: Callable[[], float],
    ) -> None:
        self.background = background
        self.links = links
        self.names = names
        self.clock = clock
        self.placements: list[Placed] = []

    def measured(self, at: float) -> np.ndarray:
        values = self.background.copy()
        for placed in self.placements:
            overlap = max(0.0, at - max(placed.start, at - WINDOW))
            values[placed.node] += placed.traffic * overlap / WINDOW
        return values

    def pod_rates(self, at: float, startup: float) -> PodTrafficReport:
        """What the learner's query would answer: each started pod's rate()
        over the window, with its workload, and the creation time of each
        pod created within the window and ``startup`` (steering.podStartup)."""
        samples = []
        for index, placed in enumerate(self.placements):
            # A pod that started within the window shows the share it has sent.
            visible = at - placed.start
            if visible > 0:
                rate = placed.traffic * min(1.0, visible / WINDOW)
                created = placed.created
                samples.append(
                    PodSample(
                        "default",
                        f"pod-{index}",
                        rate * 0.8,
                        rate * 0.2,
                        placed.workload,
                        created if at - created < WINDOW + startup else None,
                    )
                )
        return PodTrafficReport(tuple(samples), (), 0, at)

    def fetch(self, _nodes: Any) -> TrafficReport:
        at = self.clock()
        values = self.measured(at)
        by_node = {
            name: NodeTraffic(v * 0.8, v * 0.2, float(link), ("sim",))
            for name, v, link in zip(self.names, values, self.links, strict=True)
        }
        return TrafficReport(by_node, (), (), {}, (), at)


def draw_cluster(
    scenario: Scenario, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, ClusterState]:
    """(background traffic, link speed, requests) per node."""
    n = scenario.nodes
    speeds, shares = zip(*scenario.links, strict=True)
    links = rng.choice(np.array(speeds), size=n, p=np.array(shares))
    utilisation = np.clip(rng.lognormal(math.log(0.12), 0.6, n), 0.01, 0.6)
    hot = rng.choice(n, size=max(1, round(n * scenario.hot_fraction)), replace=False)
    utilisation[hot] = rng.uniform(0.75, 0.95, len(hot))
    if scenario.calm is not None:
        utilisation = rng.uniform(*scenario.calm, n)
    state = ClusterState(
        cpu_allocatable=np.full(n, 16.0),
        memory_allocatable=np.full(n, 64.0),
        cpu_requested=rng.uniform(0.2, 0.6, n) * 16,
        memory_requested=rng.uniform(0.2, 0.6, n) * 64,
        zone=np.arange(n) % 3,
    )
    return utilisation * links, links, state
