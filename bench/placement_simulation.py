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
from bench.scheduler_model import MAX_SKEW_ZONE, ClusterState, KubeScheduler, zone_skew_allows
from bench.simulated_pod_traffic import SimulatedPodTraffic
from bench.workload_spread import SpreadSummary, WorkloadSpread, workload_spreads
from harness.fakeapi import node
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.nodes import ZONE_LABEL, node_from_json
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.tier_labels import snapshot_tiers
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.tiers import TIER_LABEL, tier_changes
from kubectl_nettraffic.scoring.tiers import TIERS as TIER_COUNT
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport

WINDOW = 120.0
REFRESH = 15.0
# What a pod really takes from admission until it sends: image pull and
# container start, drawn uniform over 2-30 s, apart from what the product
# assumes (steering.podStartup, left at its default of 10 s).
START_DELAY = (2.0, 30.0)
HOT = 0.8
POD_CPU, POD_MEMORY = 0.5, 1.0  # cores, GiB requested by every simulated pod
# Runs one scenario's seeds: map, or a process pool's imap.
SeedMapper = Callable[
    [Callable[[int], tuple["Run", np.ndarray]], Iterable[int]], Iterator[tuple["Run", np.ndarray]]
]
STRATEGIES = ("default", "tutorial", "nettraffic", "tiers", "oracle")
# The oracle that knows each pod's workload's mean traffic, not the pod's
# own: what any figure per workload leaves (run for the limit rows).
ORACLE_MEAN = "oracle-mean"
# The tier label's values, coded 1.. in this order (0: no label).
TIERS = tuple(str(tier) for tier in range(1, TIER_COUNT + 1))
STEERED = ("nettraffic", "tiers")


@dataclass
class Placed:
    node: int
    traffic: float
    start: float  # when it starts sending
    workload: Workload | None = None
    created: float = 0.0  # its admission


def scheduled_terms(
    pod: dict[str, Any], index: dict[str, int], tier_codes: np.ndarray
) -> tuple[dict[int, int], np.ndarray]:
    """What kube-scheduler's NodeAffinity reads from the pod as admitted
    (the webhook's patch applied): each node's weight from the one-node
    terms, and from the terms on the traffic-tier label as the nodes carry
    it now (``tier_codes``: 0 for none, else 1 + its place in TIERS)."""
    affinity = (pod.get("spec") or {}).get("affinity") or {}
    terms = (affinity.get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    ) or []
    preferred: dict[int, int] = {}
    by_code = np.zeros(len(TIERS) + 1, dtype=np.int64)
    for term in terms:
        weight, preference = int(term["weight"]), term["preference"]
        fields = preference.get("matchFields") or []
        expressions = preference.get("matchExpressions") or []
        if len(fields) == 1 and not expressions and fields[0]["key"] == "metadata.name":
            assert fields[0]["operator"] == "In", term
            for name in fields[0]["values"]:
                preferred[index[name]] = preferred.get(index[name], 0) + weight
        elif len(expressions) == 1 and not fields and expressions[0]["key"] == TIER_LABEL:
            assert expressions[0]["operator"] == "In", term
            for tier in expressions[0]["values"]:
                by_code[1 + TIERS.index(tier)] += weight
        else:
            raise ValueError(f"the scheduler model reads no such term: {term}")
    return preferred, by_code[tier_codes]


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
    # Each workload placed after the install: its spread over zones and nodes.
    spreads: list[WorkloadSpread] = field(default_factory=list)
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


def simulate(scenario: Scenario, strategy: str, seed: int) -> tuple[Run, np.ndarray]:
    rng = np.random.default_rng(seed)
    background, links, state = _cluster(scenario, rng)
    workload_rng = np.random.default_rng(seed + 10_000)  # same workloads for every strategy
    tie_rng = np.random.default_rng(seed + 20_000)
    names = [f"node-{i:03d}" for i in range(scenario.nodes)]
    index = {name: i for i, name in enumerate(names)}
    now = [0.0]
    source = MeasuredTraffic(background, links, names, lambda: now[0])
    # The zones the scheduler model spreads over (ClusterState.zone), on the Nodes.
    nodes = [
        node_from_json(node(name, labels={ZONE_LABEL: f"zone-{zone}"}))
        for name, zone in zip(names, state.zone, strict=True)
    ]
    settings = settings_from_mapping(
        {
            "prometheus": {"url": "http://sim"},
            "metricsServer": {"enabled": False},
            "steering": {
                "preferredNodes": scenario.preferred_nodes,
                "trafficTiers": strategy == "tiers",
            },
            "scoring": {"mode": scenario.scoring_mode},
        }
    )
    startup = settings.steering.pod_startup
    # The learner, answered from the simulation's own pods.
    learning = (
        BandwidthLearning(
            settings,
            SimulatedPodTraffic(
                lambda: source.pod_rates(now[0], startup),
                lambda: {f"pod-{i}": p.created for i, p in enumerate(source.placements)},
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
    horizon = startup + WINDOW
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
    start_rng = np.random.default_rng(seed + 80_000)  # each pod's real start delay
    committed = background.copy()
    scheduler = KubeScheduler(state, tie_rng)
    run = Run()
    # Each replica refreshes on its own clock (the first, the leader, also
    # learns and labels): refresh.interval apart, from its own offset.
    offset_rng = np.random.default_rng(seed + 90_000)
    next_refresh = [float(rng.uniform(0, REFRESH))]
    next_refresh += [float(offset_rng.uniform(0, REFRESH)) for _ in webhooks[1:]]
    lowest: int | None = None  # the tutorial's pick at the last refresh
    next_learning = 0.0
    # The traffic-tier labels: what the leader assigns at each refresh
    # (kubectl_nettraffic/scoring/tiers.py), and what the nodes carry, written
    # in node order at tierLabels.writesPerSecond (tier_labels.py paces its
    # PATCHes so), the rest waiting for the next second.
    assigned: dict[str, str] = {}
    written: dict[str, str] = {}
    unwritten: list[tuple[str, str | None]] = []
    tier_codes = np.zeros(scenario.nodes, dtype=np.int64)
    write_rate = settings.tier_labels.writes_per_second
    writer_clock = 0.0
    first_labelling = 0  # the first labelling's writes, not counted as changes
    labelled_at: float | None = None
    installed = False

    def write_labels(to: float) -> None:
        nonlocal writer_clock, first_labelling
        if not unwritten:
            writer_clock = to
            return
        count = min(len(unwritten), int((to - writer_clock) * write_rate))
        for name, tier in unwritten[:count]:
            if tier is None:
                written.pop(name, None)
            else:
                written[name] = tier
            tier_codes[index[name]] = 0 if tier is None else 1 + TIERS.index(tier)
            if first_labelling:
                first_labelling -= 1
            else:
                run.label_writes += 1
        del unwritten[:count]
        writer_clock += count / write_rate

    def refresh(replica: int) -> None:
        nonlocal next_learning, lowest, assigned, labelled_at, first_labelling
        at = next_refresh[replica]
        if replica > 0:
            webhooks[replica].scoreboard.record(measurer.measure())
            return
        if installed and learning is not None and at >= next_learning:
            learning.update()  # learning.interval apart, as in the webhook
            next_learning = at + settings.learning.interval
        board.record(measurer.measure())
        lowest = int(np.argmin(source.measured(at)))
        if installed and strategy == "tiers" and board.snapshot is not None:
            write_labels(at)
            assigned = snapshot_tiers(
                board.snapshot, written, settings.steering.default_pod_bandwidth
            )
            unwritten[:] = sorted(tier_changes(assigned, written).items())
            if labelled_at is None:
                labelled_at, first_labelling = at, len(unwritten)
            else:
                run.labelled_minutes = (at - labelled_at) / 60

    def advance(to: float) -> None:
        """Refreshes and watch events due by ``to``, in time order."""
        while True:
            due = events[0][0] if events else math.inf
            replica = int(np.argmin(next_refresh))
            if min(next_refresh[replica], due) > to:
                break
            if next_refresh[replica] <= due:
                now[0] = next_refresh[replica]
                refresh(replica)
                next_refresh[replica] += REFRESH
            else:
                now[0], _, watch, line = heapq.heappop(events)
                watches[watch].receive(line)
        now[0] = to
        write_labels(to)

    def stream(pod: dict[str, Any], times: PodTimes, bound: str, admitted_by: int) -> None:
        """The pod's two events (stored, then bound) to every replica's watch;
        with ``scenario.shown_at_admission`` the other replicas see it stored
        the instant it is admitted (the limit of any watch)."""
        pod["metadata"]["creationTimestamp"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(times.created))
        )
        added = json.dumps({"type": "ADDED", "object": pod}, separators=(",", ":")).encode()
        pod["spec"]["nodeName"] = bound
        modified = json.dumps({"type": "MODIFIED", "object": pod}, separators=(",", ":")).encode()
        for watch in range(len(watches)):
            for at, line in ((times.created, added), (times.bound, modified)):
                due = at + watch_latency(scenario.binding_delay, latency_rng)
                if scenario.shown_at_admission and line is added and watch != admitted_by:
                    due = times.admitted
                heapq.heappush(events, (due, next(sequence), watch, line))

    seen: set[str] = set()
    installed_workloads: set[str] = set()
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
        if installed:
            installed_workloads.add(workload)
        template_hash = f"{burst:06x}"
        counts: dict[int, int] = {}
        firsts: dict[int, int] = {}
        timeline = scale_up(replicas, burst_start, scenario.binding_delay, timing_rng, binding_rng)
        for j, times in enumerate(timeline):
            advance(times.admitted)
            start_delay = float(start_rng.uniform(*START_DELAY))
            preferred: dict[int, int] = {}
            label_weights: np.ndarray | None = None
            booking = 0
            admitted_by = 0
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
                    admitted_by = int(replica_rng.integers(len(webhooks)))
                    serving = webhooks[admitted_by]
                decision = serving.steerer.decide(admitted, None, dry_run=False)
                if decision.patch is not None:
                    admitted = jsonpatch.apply_patch(admitted, decision.patch)
                # What kube-scheduler reads: the pod as the API server stores it.
                preferred, label_weights = scheduled_terms(admitted, index, tier_codes)
                booking = decision.booking_key
            if preferred:
                first = max(preferred, key=lambda i: preferred[i])
                firsts[first] = firsts.get(first, 0) + 1
            chosen: int | None
            if acting in ("oracle", ORACLE_MEAN):
                # The least-utilised link, the pod included, among the nodes it
                # fits on; knowing the pod's traffic, or only its workload's mean.
                known = traffic[j] if acting == "oracle" else mean
                # It keeps the workload's zone spread as kube-scheduler's
                # default constraint asks (maxSkew 5).
                allowed = state.fits(POD_CPU, POD_MEMORY) & zone_skew_allows(
                    state, workload, MAX_SKEW_ZONE
                )
                fits = np.flatnonzero(allowed)
                after = (committed[fits] + known) / links[fits]
                chosen = int(fits[np.argmin(after)]) if len(fits) else None
                if chosen is not None:
                    state.bind(chosen, workload, POD_CPU, POD_MEMORY)
            else:
                chosen = scheduler.schedule(workload, POD_CPU, POD_MEMORY, preferred, label_weights)
                if booking and chosen is not None and decision.patch is not None:
                    # steering.followBindings: every replica's watch sees it stored, then bound.
                    order += 1
                    admitted["metadata"]["name"] = f"{workload}-{template_hash}-{order:05d}"
                    stream(admitted, times, names[chosen], admitted_by)
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
                times.admitted + start_delay if installed else -WINDOW,
                Workload("default", "Deployment", workload),
                times.admitted if installed else -WINDOW - startup,
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
    run.spreads = workload_spreads(state, installed_workloads)
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
    seed_spreads: tuple[SpreadSummary, ...] = ()  # per seed: its workloads' spread


def summarise(
    scenario: Scenario, strategy: str, seeds: Sequence[int], mapper: SeedMapper = map
) -> tuple[Summary, np.ndarray]:
    """``mapper``: runs the seeds (the builtin map, or a process pool's
    imap: each seed's run depends only on the seed)."""
    maxima, stds, spread, first_spread = [], [], [], []
    seed_spreads: list[SpreadSummary] = []
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
        seed_spreads.append(SpreadSummary.of(run.spreads))
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
        tuple(seed_spreads),
    )
    return summary, last
