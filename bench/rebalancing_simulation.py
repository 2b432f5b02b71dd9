"""The rebalancing benchmark's simulation: a cluster running for two hours
in which some pods' traffic grows several-fold after placement, with and
without the descheduler loop (bench/descheduler_model.py) acting on the
recording rule's signal, and the real engine (Measurer, Scoreboard, Steerer,
the in-flight state, as serving.py wires them) steering each replacement
pod that kube-scheduler (bench/scheduler_model.py) then binds."""

import math
from dataclasses import dataclass, field

import numpy as np

from bench.descheduler_model import LoopPolicy, RunningPod, cycle, reading
from bench.placement_scenarios import LINK
from bench.scheduler_model import ClusterState, KubeScheduler
from bench.simulated_pod_traffic import SimulatedPodTraffic
from harness.fakeapi import node
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.workload_bandwidth import PodSample
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.tiers import TIER_WEIGHTS, assign_tiers
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport

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
    drift_between: tuple[float, float] = (300.0, 3600.0)  # seconds after the start
    duration: float = 7200.0


@dataclass
class LoopRun:
    hot_node_minutes: float = 0.0  # nodes above HOT of their link (true load), in minutes
    evictions: int = 0
    cycles: int = 0
    most_evictions_per_node_in_a_cycle: int = 0
    evictions_with_no_node_over: int = 0  # in cycles where no reading was above the threshold
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
        self.workload: list[str] = [""] * count
        self.size = 0

    def add(self, node: int, base: float, started: float, workload: str,
            drift_at: float = math.inf, factor: float = 1.0) -> int:  # fmt: skip
        if self.size == len(self.base):
            for name in ("node", "base", "drift_at", "factor", "started", "alive"):
                array = getattr(self, name)
                setattr(self, name, np.concatenate([array, np.zeros_like(array)]))
            self.drift_at[self.size :] = np.inf
            self.workload += [""] * self.size
        key = self.size
        self.node[key], self.base[key], self.started[key] = node, base, started
        self.drift_at[key], self.factor[key], self.alive[key] = drift_at, factor, True
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


def simulate(scenario: DriftScenario, policy: LoopPolicy | None, seed: int) -> LoopRun:
    """One run; ``policy`` None: no descheduler."""
    rng = np.random.default_rng(seed)
    loop_rng = np.random.default_rng(seed + 30_000)
    n = scenario.nodes
    names = [f"node-{i:03d}" for i in range(n)]
    links = np.full(n, LINK)
    background = np.clip(rng.lognormal(math.log(0.08), 0.5, n), 0.01, 0.3) * links
    state = ClusterState(
        cpu_allocatable=np.full(n, 32.0),
        memory_allocatable=np.full(n, 128.0),
        cpu_requested=rng.uniform(0.1, 0.3, n) * 32,
        memory_requested=rng.uniform(0.1, 0.3, n) * 128,
        zone=np.arange(n) % 3,
    )
    pods = _Pods(n * scenario.pods_per_node * 2)
    committed = background.copy()
    deployments: dict[str, float] = {}
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
            pods.add(
                chosen, traffic, -3600.0, workload,
                float(rng.uniform(*scenario.drift_between)) if drifts else math.inf,
                float(rng.uniform(*scenario.drift_factor)) if drifts else 1.0,
            )  # fmt: skip

    source = _WindowedTraffic(names, links)
    settings = settings_from_mapping(
        {"prometheus": {"url": "http://sim"}, "metricsServer": {"enabled": False},
         "steering": {"podStartup": f"{STARTUP:g}s"}}
    )  # fmt: skip

    def pod_rates() -> PodTrafficReport:
        traffic = pods.traffic(source.now)
        samples = tuple(
            PodSample(
                "default",
                f"pod-{k}",
                float(traffic[k]),
                float(traffic[k]) / 4,
                Workload("default", "Deployment", pods.workload[k]),
            )
            for k in np.flatnonzero(traffic > 0)
        )
        return PodTrafficReport(samples, (), 0, source.now)

    learning = BandwidthLearning(
        settings,
        SimulatedPodTraffic(
            pod_rates,
            lambda: {f"pod-{k}": float(pods.started[k]) for k in np.flatnonzero(pods.alive)},
            settings.learning.young_workload_age,
        ),
    )
    node_objects = [node_from_json(node(name)) for name in names]
    measurer = Measurer(
        settings, lambda: node_objects, source, None,  # type: ignore[arg-type]
        clock=lambda: source.now, learning=learning,
    )  # fmt: skip
    serving = serving_parts(settings, clock=lambda: source.now)
    scheduler = KubeScheduler(state, np.random.default_rng(seed + 20_000))
    run = LoopRun()
    for t in np.arange(-WINDOW, 0.0, STEP):  # a full window of history before the start
        source.history.append(background + pods.per_node(float(t), n))
    next_cycle = float(loop_rng.uniform(0, policy.interval)) if policy else math.inf
    tiers: dict[str, str] = {}
    label_weights = np.zeros(n, dtype=np.int64)
    replaced = 0
    for t in np.arange(0.0, scenario.duration, STEP):
        now = source.now = float(t)
        load = background + pods.per_node(now, n)
        source.history.append(load)
        learning.update()
        serving.scoreboard.record(measurer.measure())
        snapshot = serving.scoreboard.snapshot
        if snapshot is not None:
            # The traffic-tier labels as the leader writes them at each refresh
            # (steering.trafficTiers, on by default), and the weight each node
            # gets from a pod's tier terms.
            tiers = assign_tiers(snapshot.candidates, tiers)
            label_weights = np.array([TIER_WEIGHTS.get(tiers.get(name, ""), 0) for name in names])
        hot = int(np.sum(load / links > HOT))
        run.hot_nodes.append(hot)
        run.hot_node_minutes += hot * STEP / 60
        run.mean_utilisation += float(np.mean(load / links)) * STEP / scenario.duration
        if policy is None or now < next_cycle:
            continue
        next_cycle += policy.interval
        run.cycles += 1
        utilisation = source.measured() / links  # the recording rule's value
        alive = np.flatnonzero(pods.alive[: pods.size])
        on_node: dict[int, list[RunningPod]] = {}
        for k in alive:
            on_node.setdefault(int(pods.node[k]), []).append(
                RunningPod(int(k), int(pods.node[k]), float(pods.started[k]))
            )
        evicted = cycle(list(utilisation), on_node, now, policy, loop_rng)
        per_node: dict[int, int] = {}
        for victim in evicted:
            per_node[victim.node] = per_node.get(victim.node, 0) + 1
        run.most_evictions_per_node_in_a_cycle = max(
            run.most_evictions_per_node_in_a_cycle, max(per_node.values(), default=0)
        )
        if not any(reading(u) > policy.high for u in utilisation):
            run.evictions_with_no_node_over += len(evicted)
        traffic = pods.traffic(now)
        for victim in evicted:
            run.evictions += 1
            k = victim.key
            workload = pods.workload[k]
            sending = float(traffic[k]) or float(pods.base[k])
            pods.alive[k] = False
            state.unbind(victim.node, workload, POD_CPU, POD_MEMORY)
            # The ReplicaSet's replacement: admitted by the webhook, bound by kube-scheduler.
            replaced += 1
            admitted = pod_object(
                generate_name=f"{workload}-{replaced:06x}-", labels={"app": workload}
            )
            decision = serving.steerer.decide(admitted, None, dry_run=False)
            preferred = {names.index(p.node): p.weight for p in decision.preferences}
            chosen = scheduler.schedule(workload, POD_CPU, POD_MEMORY, preferred, label_weights)
            if chosen is None:
                continue
            if decision.booking_key:
                serving.inflight.rebook(decision.booking_key, names[chosen])
            # The work goes with it: the replacement sends what the evicted pod sent.
            pods.add(chosen, sending, now, workload)
    return run
