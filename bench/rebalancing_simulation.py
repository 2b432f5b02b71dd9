"""The rebalancing benchmark's simulation: a cluster running for two hours
in which some pods' traffic grows several-fold after placement, with and
without the descheduler loop acting on the recording rule's signal. Each
cycle runs the product's model of the descheduler
(kubectl_nettraffic/rebalancing/low_node_utilization.py, the one the
rebalance plan runs) on the eviction rules of eviction_rules.py; each
replacement pod is admitted by the real engine (Measurer, Scoreboard,
Steerer, the in-flight state, as serving.py wires them), or not at all for
the rows without the webhook, and bound by kube-scheduler as
bench/scheduler_model.py models it."""

import math
from dataclasses import dataclass, field

import jsonpatch
import numpy as np

from bench.labelled_nodes import labelled_nodes
from bench.placement_scenarios import LINK
from bench.scheduler_model import ClusterState, KubeScheduler, node_affinity_terms
from bench.simulated_pod_traffic import SimulatedPodTraffic
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.pods import PREFER_NO_EVICTION
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.tier_labels import snapshot_tiers
from kubectl_nettraffic.rebalancing.eviction_rules import EvictionPolicy, PodFacts, owner_counts
from kubectl_nettraffic.rebalancing.low_node_utilization import (
    NodeSample,
    Thresholds,
    classify,
    victims,
)
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport
from kubectl_nettraffic.steering.pod_bandwidth import light_for_every_link

STEP = 15.0  # seconds: the scrape, refresh and learning interval
WINDOW = 120.0  # the rate window of the node query and of the recording rule
STARTUP = 10.0  # a pod sends from this long after it is bound
HOT = 0.8
POD_CPU, POD_MEMORY = 0.5, 1.0


@dataclass(frozen=True)
class DriftScenario:
    nodes: int = 50
    pods_per_node: int = 8
    replicas: tuple[int, int] = (3, 8)  # per Deployment
    pod_median: float = 60e6  # bytes/s, before any drift
    drift_share: float = 0.15  # pods whose traffic grows; 0: no drift
    drift_factor: tuple[float, float] = (3.0, 6.0)
    # Seconds after the start: over the whole run but its last five minutes,
    # so the loop meets drift at every point of it, not only in a first hour.
    drift_between: tuple[float, float] = (300.0, 6900.0)
    duration: float = 7200.0


@dataclass(frozen=True)
class LoopPolicy:
    """The chart's defaults (rebalancing.deschedulerPolicy)."""

    thresholds: Thresholds = field(default_factory=lambda: Thresholds(50.0, 75.0, 1))
    min_pod_age: float = 600.0  # DefaultEvictor minPodAge, seconds
    interval: float = 60.0  # deschedulingInterval, seconds


@dataclass(frozen=True)
class Loop:
    """What acts on nodes that turn hot: the descheduler with ``policy``;
    replacements steered by the webhook or left to kube-scheduler alone; the
    webhook marking light pods prefer-no-eviction (steering.preferNoEvictionBelow)."""

    policy: LoopPolicy = field(default_factory=LoopPolicy)
    webhook: bool = True
    prefer_no_eviction_below: float = 0.0


@dataclass
class LoopRun:
    hot_node_minutes: float = 0.0  # nodes above HOT of their link (true load), in minutes
    evictions: int = 0
    cycles: int = 0
    most_evictions_per_node_in_a_cycle: int = 0
    heavy_victims: int = 0  # evictions of a pod sending twice its workload's first rate or more
    hot_nodes: list[int] = field(default_factory=list)  # per step, for the plot
    mean_utilisation: float = 0.0  # over nodes and steps


class _Pods:
    """Every pod as arrays: node, traffic before drift, drift time and factor, start."""

    def __init__(self, count: int) -> None:
        self.node = np.zeros(count, dtype=np.int64)
        self.base = np.zeros(count)
        self.drift_at = np.full(count, np.inf)
        self.factor = np.ones(count)
        self.started = np.zeros(count)
        self.alive = np.zeros(count, dtype=bool)
        self.marked = np.zeros(count, dtype=bool)  # prefer-no-eviction
        self.workload: list[str] = [""] * count
        self.size = 0

    def add(self, node: int, base: float, started: float, workload: str,
            drift_at: float = math.inf, factor: float = 1.0, marked: bool = False) -> int:  # fmt: skip
        if self.size == len(self.base):
            for name in ("node", "base", "drift_at", "factor", "started", "alive", "marked"):
                array = getattr(self, name)
                setattr(self, name, np.concatenate([array, np.zeros_like(array)]))
            self.drift_at[self.size :] = np.inf
            self.workload += [""] * self.size
        key = self.size
        self.node[key], self.base[key], self.started[key] = node, base, started
        self.drift_at[key], self.factor[key], self.alive[key] = drift_at, factor, True
        self.marked[key] = marked
        self.workload[key] = workload
        self.size += 1
        return key

    def traffic(self, now: float) -> np.ndarray:
        """Each pod's bytes/s at ``now`` (0 before it sends, or once gone)."""
        n = self.size
        grown = np.where(now >= self.drift_at[:n], self.factor[:n], 1.0)
        sending = self.alive[:n] & (now >= self.started[:n] + STARTUP)
        return np.where(sending, self.base[:n] * grown, 0.0)

    def per_node(self, now: float, nodes: int) -> np.ndarray:
        """Bytes/s the pods send at ``now``, summed per node."""
        return np.bincount(self.node[: self.size], self.traffic(now), nodes)


class _WindowedTraffic:
    """What Prometheus answers: each node's rate over the window, as of the sim clock."""

    def __init__(self, names: list[str], links: np.ndarray) -> None:
        self.names, self.links = names, links
        self.history: list[np.ndarray] = []
        self.now = 0.0

    def measured(self) -> np.ndarray:
        recent = self.history[-int(WINDOW / STEP) :]
        return np.asarray(np.mean(recent, axis=0))

    def fetch(self, _nodes: object) -> TrafficReport:
        values = self.measured()
        by_node = {
            name: NodeTraffic(float(v), float(v) / 4, float(link), ("sim",))
            for name, v, link in zip(self.names, values, self.links, strict=True)
        }
        return TrafficReport(by_node, (), (), {}, (), self.now)


def _lister_order(pods: _Pods, names: list[str], now: float, rng: np.random.Generator
                  ) -> dict[str, list[PodFacts]]:  # fmt: skip
    """Each node's running pods as the eviction rules read them, in a random
    order (the descheduler's lister order; every simulated pod has the same
    priority and QoS class, so only prefer-no-eviction orders them)."""
    by_node: dict[str, list[PodFacts]] = {}
    alive = np.flatnonzero(pods.alive[: pods.size])
    for k in alive[rng.permutation(len(alive))]:
        node = names[int(pods.node[k])]
        facts = PodFacts(
            "default", f"pod-{k}", node, ("ReplicaSet", pods.workload[k]), None,
            "Burstable", now - float(pods.started[k]), False, False, bool(pods.marked[k]),
        )  # fmt: skip
        by_node.setdefault(node, []).append(facts)
    return by_node


def simulate(scenario: DriftScenario, loop: Loop | None, seed: int) -> LoopRun:
    """One run; ``loop`` None: no descheduler."""
    return DriftRun(scenario, loop, seed).run()


class DriftRun:
    """The cluster, its pods placed before the run, the webhook (serving_parts,
    as in the webhook) and kube-scheduler, on a clock of STEP seconds."""

    def __init__(self, scenario: DriftScenario, loop: Loop | None, seed: int) -> None:
        self.scenario, self.loop = scenario, loop
        self.policy = loop.policy if loop else None
        light_share = loop.prefer_no_eviction_below if loop else 0.0
        rng = np.random.default_rng(seed)
        self.loop_rng = np.random.default_rng(seed + 30_000)
        n = scenario.nodes
        self.names = [f"node-{i:03d}" for i in range(n)]
        self.links = np.full(n, LINK)
        self.background = np.clip(rng.lognormal(math.log(0.08), 0.5, n), 0.01, 0.3) * self.links
        self.state = ClusterState(
            cpu_allocatable=np.full(n, 32.0),
            memory_allocatable=np.full(n, 128.0),
            cpu_requested=rng.uniform(0.1, 0.3, n) * 32,
            memory_requested=rng.uniform(0.1, 0.3, n) * 128,
            zone=np.arange(n) % 3,
        )
        self.pods = _Pods(n * scenario.pods_per_node * 2)
        self.deployments: dict[str, float] = {}
        self._place_before(rng, light_share)
        self.source = _WindowedTraffic(self.names, self.links)
        self.settings = settings = settings_from_mapping(
            {"prometheus": {"url": "http://sim"}, "metricsServer": {"enabled": False},
             "steering": {"podStartup": f"{STARTUP:g}s", "preferNoEvictionBelow": light_share}}
        )  # fmt: skip
        self.learning = BandwidthLearning(
            settings,
            SimulatedPodTraffic(
                self._pod_rates,
                lambda: {
                    f"pod-{k}": float(self.pods.started[k]) for k in np.flatnonzero(self.pods.alive)
                },
                settings.learning.young_workload_age,
            ),
        )
        # Each node's labels: the traffic tier, as the leader writes it at each refresh.
        self.node_labels: list[dict[str, str]] = [{} for _ in self.names]
        source = self.source
        self.measurer = Measurer(
            settings, lambda: labelled_nodes(self.names, self.node_labels), source, None,  # type: ignore[arg-type]
            clock=lambda: source.now, learning=self.learning,
        )  # fmt: skip
        self.serving = serving_parts(settings, clock=lambda: source.now)
        self.scheduler = KubeScheduler(self.state, np.random.default_rng(seed + 20_000))
        self.result = LoopRun()
        self.tiers: dict[str, str] = {}
        self.replaced = 0

    def _place_before(self, rng: np.random.Generator, light_share: float) -> None:
        """The pods running at the start, placed as well as placement can."""
        scenario, pods, deployments = self.scenario, self.pods, self.deployments
        n, links, state = scenario.nodes, self.links, self.state
        committed = self.background.copy()
        while pods.size < n * scenario.pods_per_node:
            workload = f"deploy-{len(deployments)}"
            deployments[workload] = float(rng.lognormal(math.log(scenario.pod_median), 0.5))
            for _ in range(int(rng.integers(scenario.replicas[0], scenario.replicas[1] + 1))):
                traffic = float(rng.lognormal(math.log(deployments[workload]), 0.2))
                # Placed before the run as well as placement can: the least-filled link.
                chosen = int(np.argmin((committed + traffic) / links))
                state.bind(chosen, workload, POD_CPU, POD_MEMORY)
                committed[chosen] += traffic
                drifts = rng.random() < scenario.drift_share
                # Admitted an hour before the run, its workload's rate learned:
                # the webhook's own rule decides the mark.
                marked = light_for_every_link(deployments[workload], "workload", LINK, light_share)
                pods.add(
                    chosen, traffic, -3600.0, workload,
                    float(rng.uniform(*scenario.drift_between)) if drifts else math.inf,
                    float(rng.uniform(*scenario.drift_factor)) if drifts else 1.0, marked,
                )  # fmt: skip

    def _pod_rates(self) -> PodTrafficReport:
        now = self.source.now
        traffic = self.pods.traffic(now)
        samples = tuple(
            PodSample(
                "default",
                f"pod-{k}",
                float(traffic[k]),
                float(traffic[k]) / 4,
                Workload("default", "Deployment", self.pods.workload[k]),
            )
            for k in np.flatnonzero(traffic > 0)
        )
        return PodTrafficReport(samples, (), 0, now)

    def run(self) -> LoopRun:
        scenario, source, policy, run = self.scenario, self.source, self.policy, self.result
        n = scenario.nodes
        for t in np.arange(-WINDOW, 0.0, STEP):  # a full window of history before the start
            source.history.append(self.background + self.pods.per_node(float(t), n))
        next_cycle = float(self.loop_rng.uniform(0, policy.interval)) if policy else math.inf
        for t in np.arange(0.0, scenario.duration, STEP):
            now = source.now = float(t)
            load = self.background + self.pods.per_node(now, n)
            source.history.append(load)
            self._refresh()
            hot = int(np.sum(load / self.links > HOT))
            run.hot_nodes.append(hot)
            run.hot_node_minutes += hot * STEP / 60
            run.mean_utilisation += float(np.mean(load / self.links)) * STEP / scenario.duration
            if policy is None or now < next_cycle:
                continue
            next_cycle += policy.interval
            run.cycles += 1
            self._cycle(policy, now)
        return run

    def _refresh(self) -> None:
        self.learning.update()
        board = self.serving.scoreboard
        board.record(self.measurer.measure())
        snapshot = board.snapshot
        if snapshot is not None:
            # The traffic-tier labels as the leader writes them at each refresh
            # (steering.trafficTiers, on by default).
            steering = self.settings.steering
            self.tiers = snapshot_tiers(
                snapshot, self.tiers, steering.default_pod_bandwidth, steering.busy_above
            )
            for name, labels in zip(self.names, self.node_labels, strict=True):
                labels.pop(TIER_LABEL, None)
                if name in self.tiers:
                    labels[TIER_LABEL] = self.tiers[name]

    def _cycle(self, policy: LoopPolicy, now: float) -> None:
        """One descheduling cycle: the plugin's classification and victims."""
        run, names, pods = self.result, self.names, self.pods
        # The recording rule's value, clamped to 1 as the rule does.
        utilisation = np.minimum(self.source.measured() / self.links, 1.0)
        classification = classify(
            [NodeSample(name, float(u)) for name, u in zip(names, utilisation, strict=True)],
            policy.thresholds,
        )
        if classification.idle is not None:
            return
        on_node = _lister_order(pods, names, now, self.loop_rng)
        evictions = victims(
            classification.over,
            on_node,
            EvictionPolicy(frozenset(), policy.min_pod_age),
            owner_counts([f for facts in on_node.values() for f in facts]),
            policy.thresholds.evictions_per_node,
        )
        run.most_evictions_per_node_in_a_cycle = max(
            run.most_evictions_per_node_in_a_cycle, max(map(len, evictions.values()), default=0)
        )
        rates = pods.traffic(now)
        for node_name, evicted in evictions.items():
            source_node = names.index(node_name)
            for victim in evicted:
                run.evictions += 1
                k = int(victim.name.removeprefix("pod-"))
                workload = pods.workload[k]
                run.heavy_victims += bool(rates[k] >= 2 * self.deployments[workload])
                sending = float(rates[k]) or float(pods.base[k])
                pods.alive[k] = False
                self.state.unbind(source_node, workload, POD_CPU, POD_MEMORY)
                self._replace(workload, sending, now)

    def _replace(self, workload: str, sending: float, now: float) -> None:
        """The ReplicaSet's replacement: admitted by the webhook (or not),
        bound by kube-scheduler."""
        names, loop = self.names, self.loop
        self.replaced += 1
        preferred: dict[int, int] = {}
        weights, marked, booking = None, False, 0
        steered = loop is not None and loop.webhook
        if steered:
            admitted = pod_object(
                generate_name=f"{workload}-{self.replaced:06x}-", labels={"app": workload}
            )
            decision = self.serving.steerer.decide(admitted, None, dry_run=False)
            patched = jsonpatch.apply_patch(admitted, decision.patch or [])
            preferred, weights = node_affinity_terms(patched, self.node_labels)
            marked = PREFER_NO_EVICTION in patched["metadata"].get("annotations", {})
            booking = decision.booking_key
        chosen = self.scheduler.schedule(workload, POD_CPU, POD_MEMORY, preferred, weights)
        if chosen is None:
            return
        if booking:
            self.serving.inflight.rebook(booking, names[chosen])
        # The work goes with it: the replacement sends what the evicted pod sent.
        self.pods.add(chosen, sending, now, workload, marked=marked)
