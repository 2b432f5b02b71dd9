"""The placement benchmark's simulation: one scenario, one strategy, one
seed, driven by the real engine (Measurer, Scoreboard, Steerer and the
in-flight state, as serving.py wires them) with kube-scheduler as
bench/scheduler_model.py models it; and the summary over seeds."""

import functools
import heapq
import itertools
import json
import math
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import numpy as np

from bench.control_plane import PodTimes, scale_up, watch_latency
from bench.placement_scenarios import Scenario
from bench.scheduler_model import ClusterState, KubeScheduler
from bench.simulated_pod_traffic import SimulatedPodTraffic
from harness.fakeapi import node
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.workload_bandwidth import PodSample
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.tiers import TIER_WEIGHTS, assign_tiers, tier_changes
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport

WINDOW = 120.0
REFRESH = 15.0
STARTUP = 10.0
HOT = 0.8
POD_CPU, POD_MEMORY = 0.5, 1.0  # cores, GiB requested by every simulated pod
# Runs one scenario's seeds: map, or a process pool's imap.
SeedMapper = Callable[
    [Callable[[int], tuple["Run", np.ndarray]], Iterable[int]], Iterator[tuple["Run", np.ndarray]]
]
STRATEGIES = ("default", "tutorial", "nettraffic", "tiers", "oracle")
STEERED = ("nettraffic", "tiers")


@dataclass
class Placed:
    node: int
    traffic: float
    start: float
    workload: Workload | None = None


@dataclass
class Run:
    placements: list[Placed] = field(default_factory=list)
    hot: int = 0
    pending: int = 0  # pods no node could take (kube-scheduler leaves them Pending)
    steered: int = 0  # pods that carried preferred nodes
    preferred_scored: int = 0  # ... of which kube-scheduler scored at least one preferred node
    on_preferred: int = 0  # ... of which landed on a preferred node
    on_first: int = 0  # ... of which landed on the first preferred node
    burst_max: list[int] = field(default_factory=list)  # per burst: most pods on one node
    burst_first_max: list[int] = field(
        default_factory=list
    )  # per burst: most first preferences on one node
    burst_sizes: list[int] = field(default_factory=list)
    # The steering replicas' measured watch delay (replica_share.WatchDelay), after each burst.
    watch_delays: list[float] = field(default_factory=list)
    label_writes: int = 0  # traffic-tier label changes after the first labelling
    labelled_minutes: float = 0.0  # simulated time over which they were counted
    # Placements of a workload's first burst, and of its later ones (returning workloads).
    first_burst_pods: int = 0
    first_burst_hot: int = 0
    later_burst_pods: int = 0
    later_burst_hot: int = 0


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

    def pod_rates(self, at: float) -> PodTrafficReport:
        """What the learner's query would answer: each started pod's rate()
        over the window, with its workload, and the creation time of each
        pod created within the window and podStartup."""
        samples = []
        for index, placed in enumerate(self.placements):
            # A pod that started within the window shows the share it has sent.
            visible = at - placed.start
            if visible > 0:
                rate = placed.traffic * min(1.0, visible / WINDOW)
                created = placed.start - STARTUP
                samples.append(
                    PodSample(
                        "default",
                        f"pod-{index}",
                        rate * 0.8,
                        rate * 0.2,
                        placed.workload,
                        created if at - created < WINDOW + STARTUP else None,
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


def _cluster(
    scenario: Scenario, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, ClusterState]:
    """(background traffic, link speed, requests) per node."""
    n = scenario.nodes
    speeds, shares = zip(*scenario.links, strict=True)
    links = rng.choice(np.array(speeds), size=n, p=np.array(shares))
    utilisation = np.clip(rng.lognormal(math.log(0.12), 0.6, n), 0.01, 0.6)
    hot = rng.choice(n, size=max(1, round(n * scenario.hot_fraction)), replace=False)
    utilisation[hot] = rng.uniform(0.75, 0.95, len(hot))
    state = ClusterState(
        cpu_allocatable=np.full(n, 16.0),
        memory_allocatable=np.full(n, 64.0),
        cpu_requested=rng.uniform(0.2, 0.6, n) * 16,
        memory_requested=rng.uniform(0.2, 0.6, n) * 64,
        zone=np.arange(n) % 3,
    )
    return utilisation * links, links, state


def simulate(scenario: Scenario, strategy: str, seed: int) -> tuple[Run, np.ndarray]:
    rng = np.random.default_rng(seed)
    background, links, state = _cluster(scenario, rng)
    workload_rng = np.random.default_rng(seed + 10_000)  # same workloads for every strategy
    tie_rng = np.random.default_rng(seed + 20_000)
    names = [f"node-{i:03d}" for i in range(scenario.nodes)]
    index = {name: i for i, name in enumerate(names)}
    now = [0.0]
    source = MeasuredTraffic(background, links, names, lambda: now[0])
    nodes = [node_from_json(node(name)) for name in names]
    settings = settings_from_mapping(
        {
            "prometheus": {"url": "http://sim"},
            "metricsServer": {"enabled": False},
            "steering": {
                "podStartup": f"{STARTUP:g}s",
                "preferredNodes": scenario.preferred_nodes,
                "trafficTiers": strategy == "tiers",
            },
            "scoring": {"mode": scenario.scoring_mode},
        }
    )
    # The learner, answered from the simulation's own pods.
    learning = (
        BandwidthLearning(
            settings,
            SimulatedPodTraffic(
                lambda: source.pod_rates(now[0]),
                lambda: {f"pod-{i}": p.start - STARTUP for i, p in enumerate(source.placements)},
                settings.learning.young_workload_age,
            ),
        )
        if scenario.learning
        else None
    )
    measurer = Measurer(
        settings,
        lambda: nodes,
        source,  # type: ignore[arg-type]
        None,
        clock=lambda: now[0],
        learning=learning,
    )
    webhooks = [
        serving_parts(settings, clock=lambda: now[0], replica=f"replica-{i}")
        for i in range(scenario.replicas)
    ]
    serving = webhooks[0]
    board = serving.scoreboard
    # Each replica's binding watch, fed the steered pods' events as the API
    # server would stream them (bench/control_plane.py has their timing).
    horizon = STARTUP + WINDOW
    watches = [
        BindingWatch(
            None,  # type: ignore[arg-type]
            w.inflight,
            w.inflight.replica or "",
            horizon,
            lambda: now[0],
        )
        for w in webhooks
    ]
    events: list[tuple[float, int, int, bytes]] = []  # (due, order, watch, line)
    sequence = itertools.count()
    # The control plane's timing, one stream per kind of draw, so that rows
    # differing only by binding delay or replica count admit alike.
    timing_rng = np.random.default_rng(seed + 50_000)
    binding_rng = np.random.default_rng(seed + 60_000)
    latency_rng = np.random.default_rng(seed + 70_000)
    replica_rng = np.random.default_rng(seed + 40_000)
    committed = background.copy()
    scheduler = KubeScheduler(state, tie_rng)
    run = Run()
    next_refresh = float(rng.uniform(0, REFRESH))
    lowest: int | None = None  # the tutorial's pick at the last refresh
    next_learning = 0.0
    # The traffic-tier labels as the leader writes them at each refresh
    # (kubectl_nettraffic/scoring/tiers.py), and each node's weight from the tier terms.
    tiers: dict[str, str] = {}
    label_weights = np.zeros(scenario.nodes, dtype=np.int64)
    labelled_at: float | None = None
    installed = False

    def refresh() -> None:
        nonlocal next_learning, lowest, tiers, labelled_at
        if installed and learning is not None and next_refresh >= next_learning:
            learning.update()  # learning.interval apart, as in the webhook
            next_learning = next_refresh + settings.learning.interval
        outcome = measurer.measure()
        for webhook in webhooks:  # each replica measures the same Prometheus
            webhook.scoreboard.record(outcome)
        lowest = int(np.argmin(source.measured(next_refresh)))
        if installed and strategy == "tiers" and board.snapshot is not None:
            assigned = assign_tiers(board.snapshot.candidates, tiers)
            if labelled_at is None:
                labelled_at = next_refresh
            else:
                run.label_writes += len(tier_changes(assigned, tiers))
                run.labelled_minutes = (next_refresh - labelled_at) / 60
            tiers = assigned
            for name, tier in tiers.items():
                label_weights[index[name]] = TIER_WEIGHTS.get(tier, 0)

    def advance(to: float) -> None:
        """Refreshes and watch events due by ``to``, in time order."""
        nonlocal next_refresh
        while True:
            due = events[0][0] if events else math.inf
            if min(next_refresh, due) > to:
                break
            if next_refresh <= due:
                now[0] = next_refresh
                refresh()
                next_refresh += REFRESH
            else:
                now[0], _, watch, line = heapq.heappop(events)
                watches[watch].receive(line)
        now[0] = to

    def stream(pod: dict[str, Any], times: PodTimes, bound: str) -> None:
        """The pod's two events (stored, then bound) to every replica's watch."""
        pod["metadata"]["creationTimestamp"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(times.created))
        )
        added = json.dumps({"type": "ADDED", "object": pod}, separators=(",", ":")).encode()
        pod["spec"]["nodeName"] = bound
        modified = json.dumps({"type": "MODIFIED", "object": pod}, separators=(",", ":")).encode()
        for watch in range(len(watches)):
            for at, line in ((times.created, added), (times.bound, modified)):
                due = at + watch_latency(scenario.binding_delay, latency_rng)
                heapq.heappush(events, (due, next(sequence), watch, line))

    seen: set[str] = set()
    means: dict[str, float] = {}
    order = 0
    for burst in range(scenario.running_bursts + scenario.bursts):
        burst_start = 60.0 + burst * 30.0
        installed = burst >= scenario.running_bursts  # else it ran before the install
        acting = strategy if installed else "oracle"
        replicas = int(workload_rng.integers(scenario.burst_sizes[0], scenario.burst_sizes[1] + 1))
        median = scenario.pod_median
        if not installed and scenario.running_pod_median is not None:
            median = scenario.running_pod_median
        if scenario.workloads is None:
            workload = f"workload-{burst}"
            traffic = workload_rng.lognormal(math.log(median), 0.5, replicas)
            mean = median * math.exp(0.5**2 / 2)  # of that lognormal
        else:
            # A returning Deployment (a scale-up, or a rollout: a new ReplicaSet),
            # or a brand-new one; its pods send around its own mean.
            if not means or workload_rng.random() < scenario.new_workload_share:
                workload = f"deploy-{len(means)}"
                means[workload] = float(workload_rng.lognormal(math.log(scenario.pod_median), 0.5))
            else:
                workload = str(workload_rng.choice(sorted(means)[-scenario.workloads :]))
            traffic = workload_rng.lognormal(math.log(means[workload]), 0.2, replicas)
            mean = means[workload] * math.exp(0.2**2 / 2)
        first_burst = workload not in seen
        seen.add(workload)
        template_hash = f"{burst:06x}"
        counts: dict[int, int] = {}
        firsts: dict[int, int] = {}
        timeline = scale_up(replicas, burst_start, scenario.binding_delay, timing_rng, binding_rng)
        for j, times in enumerate(timeline):
            advance(times.admitted)
            preferred: dict[int, int] = {}
            booking = 0
            if acting == "tutorial" and lowest is not None:
                preferred = {lowest: 100}
            elif acting in STEERED:
                annotations = {}
                if scenario.estimate_factor is not None:
                    annotations["nettraffic.io/expected-bandwidth"] = (
                        f"{traffic[j] * scenario.estimate_factor:.0f}"
                    )
                elif scenario.annotate_workload_mean:
                    annotations["nettraffic.io/expected-bandwidth"] = f"{mean:.0f}"
                admitted = pod_object(
                    generate_name=f"{workload}-{template_hash}-",
                    labels={"app": workload, "pod-template-hash": template_hash},
                    annotations=annotations or None,
                )
                if len(webhooks) > 1:
                    serving = webhooks[int(replica_rng.integers(len(webhooks)))]
                decision = serving.steerer.decide(admitted, None, dry_run=False)
                preferred = {index[p.node]: p.weight for p in decision.preferences}
                booking = decision.booking_key
            if preferred:
                first = max(preferred, key=lambda i: preferred[i])
                firsts[first] = firsts.get(first, 0) + 1
            chosen: int | None
            if acting == "oracle":
                # The least-utilised link, the pod included, among the nodes it fits on.
                fits = np.flatnonzero(state.fits(POD_CPU, POD_MEMORY))
                after = (committed[fits] + traffic[j]) / links[fits]
                chosen = int(fits[np.argmin(after)]) if len(fits) else None
                if chosen is not None:
                    state.bind(chosen, workload, POD_CPU, POD_MEMORY)
            else:
                chosen = scheduler.schedule(
                    workload,
                    POD_CPU,
                    POD_MEMORY,
                    preferred,
                    label_weights if acting == "tiers" else None,
                )
                if booking and chosen is not None and decision.patch is not None:
                    # steering.followBindings: every replica's watch sees it stored, then bound.
                    pod = jsonpatch.apply_patch(admitted, decision.patch)
                    order += 1
                    pod["metadata"]["name"] = f"{workload}-{template_hash}-{order:05d}"
                    stream(pod, times, names[chosen])
                if preferred:
                    run.steered += 1
                    run.preferred_scored += bool(set(preferred) & set(scheduler.last_scored))
                    run.on_preferred += chosen in preferred
                    run.on_first += chosen == first
            if chosen is None:
                run.pending += installed
                continue
            hot = committed[chosen] / links[chosen] > HOT
            committed[chosen] += traffic[j]
            placed = Placed(
                chosen,
                float(traffic[j]),
                # Pods that ran before the install have sent for a whole window.
                times.admitted + STARTUP if installed else -WINDOW,
                Workload("default", "Deployment", workload),
            )
            source.placements.append(placed)
            if not installed:
                continue
            run.hot += hot
            if first_burst:
                run.first_burst_pods += 1
                run.first_burst_hot += hot
            else:
                run.later_burst_pods += 1
                run.later_burst_hot += hot
            run.placements.append(placed)
            counts[chosen] = counts.get(chosen, 0) + 1
        if installed:
            run.burst_max.append(max(counts.values(), default=0))
            run.burst_first_max.append(max(firsts.values(), default=0))
            run.burst_sizes.append(replicas)
            if acting in STEERED:
                run.watch_delays.append(statistics.mean(w.inflight.watch_delay for w in webhooks))
    return run, committed / links


@dataclass(frozen=True)
class Summary:
    max_utilisation: float
    hot_share: float
    std_utilisation: float
    burst_max_share: float  # largest share of one burst on one node
    first_preference_share: float | None  # largest share of a burst's first preferences on one node
    pending_share: float  # pods left Pending: no node had room
    preferred_scored_share: float | None  # steered pods with a preferred node among those scored
    on_preferred_share: float | None  # steered pods bound to a preferred node
    on_first_share: float | None  # steered pods bound to their first preferred node
    label_writes_per_minute: float | None  # traffic-tier label changes (tiers only)
    first_burst_hot_share: float | None  # pods of a workload's first burst placed hot
    later_burst_hot_share: float | None  # pods of its later bursts placed hot
    watch_delay: float | None  # the steering replicas' measured watch delay, mean over bursts
    # Per seed, in the order run: the busiest link, and (pods placed hot, pods placed).
    seed_maxima: tuple[float, ...] = ()
    seed_hot: tuple[tuple[int, int], ...] = ()


def summarise(
    scenario: Scenario, strategy: str, seeds: Sequence[int], mapper: SeedMapper = map
) -> tuple[Summary, np.ndarray]:
    """``mapper``: runs the seeds (the builtin map, or a process pool's
    imap: each seed's run depends only on the seed)."""
    maxima, stds, spread, first_spread = [], [], [], []
    seed_hot: list[tuple[int, int]] = []
    pending = steered = preferred_scored = on_preferred = on_first = 0
    label_writes = 0
    first_pods = first_hot = later_pods = later_hot = 0
    labelled_minutes = 0.0
    watch_delays: list[float] = []
    last = np.zeros(0)
    for run, utilisation in mapper(functools.partial(simulate, scenario, strategy), seeds):
        maxima.append(float(utilisation.max()))
        stds.append(float(utilisation.std()))
        seed_hot.append((run.hot, len(run.placements)))
        pending += run.pending
        steered += run.steered
        preferred_scored += run.preferred_scored
        on_preferred += run.on_preferred
        on_first += run.on_first
        label_writes += run.label_writes
        first_pods += run.first_burst_pods
        first_hot += run.first_burst_hot
        later_pods += run.later_burst_pods
        later_hot += run.later_burst_hot
        labelled_minutes += run.labelled_minutes
        watch_delays += run.watch_delays
        spread.append(
            max(top / size for top, size in zip(run.burst_max, run.burst_sizes, strict=True))
        )
        first_spread.append(
            max(top / size for top, size in zip(run.burst_first_max, run.burst_sizes, strict=True))
        )
        last = utilisation
    firsts = statistics.mean(first_spread) if strategy in ("tutorial", *STEERED) else None
    hot, pods = (sum(column) for column in zip(*seed_hot, strict=True))
    summary = Summary(
        statistics.mean(maxima),
        hot / pods,
        statistics.mean(stds),
        statistics.mean(spread),
        firsts,
        pending / (pods + pending),
        preferred_scored / steered if steered else None,
        on_preferred / steered if steered else None,
        on_first / steered if steered else None,
        label_writes / labelled_minutes if strategy == "tiers" and labelled_minutes else None,
        first_hot / first_pods if first_pods else None,
        later_hot / later_pods if later_pods else None,
        statistics.mean(watch_delays) if watch_delays else None,
        tuple(maxima),
        tuple(seed_hot),
    )
    return summary, last
