"""The placement benchmark's simulation: one scenario, one strategy, one
seed, driven by the real engine (Measurer, Scoreboard, Steerer and the
in-flight state, as serving.py wires them) with kube-scheduler as
bench/scheduler_model.py models it. The summary over seeds:
bench/placement_summary.py."""

import heapq
import itertools
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import jsonpatch
import numpy as np

from bench.control_plane import PodTimes, scale_up, watch_latency
from bench.placement_scenarios import Scenario
from bench.pod_events import event_line, unsteered_pod
from bench.scheduler_model import MAX_SKEW_ZONE, KubeScheduler, zone_skew_allows
from bench.simulated_cluster import WINDOW, MeasuredTraffic, Placed, draw_cluster, scheduled_terms
from bench.simulated_pod_traffic import SimulatedPodTraffic
from bench.workload_spread import WorkloadSpread, workload_spreads
from harness.fakeapi import node
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.nodes import ZONE_LABEL, node_from_json
from kubectl_nettraffic.kube.reflector import Reflector
from kubectl_nettraffic.kube.unsteered_pods import UnsteeredPods
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.tier_labels import snapshot_tiers
from kubectl_nettraffic.scoring.tier_weights import TIER_NAMES
from kubectl_nettraffic.scoring.tiers import TIER_LABEL, tier_changes
from kubectl_nettraffic.serving import serving_parts

REFRESH = 15.0
# What a pod really takes from admission until it sends: image pull and
# container start, drawn uniform over 2-30 s, apart from what the product
# assumes (steering.podStartup, left at its default of 10 s).
START_DELAY = (2.0, 30.0)
HOT = 0.8
POD_CPU, POD_MEMORY = 0.5, 1.0  # cores, GiB requested by every simulated pod
STRATEGIES = ("default", "tutorial", "nettraffic", "tiers", "oracle")
# The oracle that knows each pod's workload's mean traffic, not the pod's
# own: what any figure per workload leaves (run for the limit rows).
ORACLE_MEAN = "oracle-mean"
STEERED = ("nettraffic", "tiers")


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
    # per burst: most first preferences on one node
    burst_first_max: list[int] = field(default_factory=list)
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


@dataclass
class Burst:
    """One scale-up: its workload, its pods' traffic and its workload's mean."""

    number: int
    workload: str
    traffic: np.ndarray
    mean: float
    installed: bool  # else it ran before the install
    first: bool  # the workload's first burst
    # Its pods' ReplicaSet (pod-template-hash): the Deployment's first
    # burst's, as a scale-up keeps its ReplicaSet. (Before, each burst had
    # one of its own, so the product's spread, per ReplicaSet as
    # kube-scheduler's DefaultSelector counts it, saw one burst of a
    # Deployment at a time while the pods of all its bursts kept running.)
    template: str = ""
    counts: dict[int, int] = field(default_factory=dict)  # node -> its pods placed there
    firsts: dict[int, int] = field(default_factory=dict)  # node -> first preferences for it


@dataclass
class Steered:
    """What one admission asked kube-scheduler for."""

    preferred: dict[int, int]  # node -> weight
    label_weights: np.ndarray | None = None
    booking: int = 0
    admitted: dict[str, Any] | None = None  # the pod as stored, the patch applied
    admitted_by: int = 0


def simulate(scenario: Scenario, strategy: str, seed: int) -> tuple[Run, np.ndarray]:
    return Simulation(scenario, strategy, seed).run()


class Simulation:
    """One scenario, strategy and seed: the cluster, the webhook replicas
    (serving_parts, as in the webhook) with their binding watches, the
    learner and the tier labels, on a simulated clock."""

    def __init__(self, scenario: Scenario, strategy: str, seed: int) -> None:
        self.scenario, self.strategy = scenario, strategy
        rng = np.random.default_rng(seed)
        self.background, self.links, self.state = draw_cluster(scenario, rng)
        self.workload_rng = np.random.default_rng(
            seed + 10_000
        )  # same workloads for every strategy
        self.names = [f"node-{i:03d}" for i in range(scenario.nodes)]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.now = 0.0
        self.source = MeasuredTraffic(self.background, self.links, self.names, lambda: self.now)
        self.zones = np.array([f"zone-{zone}" for zone in self.state.zone])
        # The zones the scheduler model spreads over (ClusterState.zone), on the Nodes.
        self.nodes = [
            node_from_json(node(name, labels={ZONE_LABEL: zone}))
            for name, zone in zip(self.names, self.zones, strict=True)
        ]
        self.settings = settings = settings_from_mapping(
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
        self.startup = settings.steering.pod_startup
        self.learning = self._learning() if scenario.learning else None
        self.measurer = Measurer(
            settings,
            lambda: self.nodes,  # with the tier labels as written
            self.source,  # type: ignore[arg-type]
            None,
            clock=lambda: self.now,
            learning=self.learning,
        )
        self.webhooks = [
            serving_parts(settings, clock=lambda: self.now, replica=f"replica-{i}")
            for i in range(scenario.replicas)
        ]
        # Each replica's binding watch, fed the steered pods' events as the API
        # server would stream them (bench/control_plane.py has their timing).
        horizon = self.startup + WINDOW
        self.watches = [
            BindingWatch(
                None,  # type: ignore[arg-type]
                w.inflight,
                w.inflight.replica or "",
                horizon,
                lambda: self.now,
            )
            for w in self.webhooks
        ]
        # And each replica's watch of the pods no replica steered: those that
        # ran before the install, listed when it starts, and any admitted
        # since without a booking.
        self.unsteered = [UnsteeredPods(None, w.inflight) for w in self.webhooks]  # type: ignore[arg-type]
        self.listed: list[bytes] = []  # the pods bound before the install, as listed
        self.events: list[tuple[float, int, Reflector, bytes]] = []  # (due, order, watch, line)
        self.sequence = itertools.count()
        # The control plane's timing, one stream per kind of draw, so that rows
        # differing only by binding delay or replica count admit alike.
        self.timing_rng = np.random.default_rng(seed + 50_000)
        self.binding_rng = np.random.default_rng(seed + 60_000)
        self.latency_rng = np.random.default_rng(seed + 70_000)
        self.replica_rng = np.random.default_rng(seed + 40_000)
        self.start_rng = np.random.default_rng(seed + 80_000)  # each pod's real start delay
        self.committed = self.background.copy()
        self.scheduler = KubeScheduler(self.state, np.random.default_rng(seed + 20_000))
        self.result = Run()
        # Each replica refreshes on its own clock (the first, the leader, also
        # learns and labels): refresh.interval apart, from its own offset.
        offset_rng = np.random.default_rng(seed + 90_000)
        self.next_refresh = [float(rng.uniform(0, REFRESH))]
        self.next_refresh += [float(offset_rng.uniform(0, REFRESH)) for _ in self.webhooks[1:]]
        self.lowest: int | None = None  # the tutorial's pick at the last refresh
        self.next_learning = 0.0
        # The traffic-tier labels: what the leader assigns at each refresh
        # (kubectl_nettraffic/scoring/tiers.py), and what the nodes carry, written
        # in node order at tierLabels.writesPerSecond (tier_labels.py paces its
        # PATCHes so), the rest waiting for the next second.
        self.assigned: dict[str, str] = {}
        self.written: dict[str, str] = {}
        self.unwritten: list[tuple[str, str | None]] = []
        self.tier_codes = np.zeros(scenario.nodes, dtype=np.int64)
        self.write_rate = settings.tier_labels.writes_per_second
        self.writer_clock = 0.0
        self.first_labelling = 0  # the first labelling's writes, not counted as changes
        self.labelled_at: float | None = None
        self.installed = False
        # Each workload seen so far -> its ReplicaSet's hash.
        self.templates: dict[str, str] = {}
        self.installed_workloads: set[str] = set()
        self.means: dict[str, float] = {}
        self.order = 0

    def _learning(self) -> BandwidthLearning:
        """The learner, answered from the simulation's own pods."""
        source, startup = self.source, self.startup
        return BandwidthLearning(
            self.settings,
            SimulatedPodTraffic(
                lambda: source.pod_rates(self.now, startup),
                lambda: {f"pod-{i}": p.created for i, p in enumerate(source.placements)},
                self.settings.learning.young_workload_age,
            ),
        )

    def run(self) -> tuple[Run, np.ndarray]:
        scenario = self.scenario
        for number in range(scenario.running_bursts + scenario.bursts):
            self._burst(self._draw_burst(number))
        self.result.spreads = workload_spreads(self.state, self.installed_workloads)
        return self.result, self.committed / self.links

    # -- the control plane's clock ------------------------------------------

    def _write_labels(self, to: float) -> None:
        unwritten = self.unwritten
        if not unwritten:
            self.writer_clock = to
            return
        count = min(len(unwritten), int((to - self.writer_clock) * self.write_rate))
        for name, tier in unwritten[:count]:
            if tier is None:
                self.written.pop(name, None)
            else:
                self.written[name] = tier
            i = self.index[name]
            self.tier_codes[i] = 0 if tier is None else 1 + TIER_NAMES.index(tier)
            tiered = {TIER_LABEL: tier} if tier is not None else {}
            self.nodes[i] = replace(self.nodes[i], labels={ZONE_LABEL: self.zones[i], **tiered})
            if self.first_labelling:
                self.first_labelling -= 1
            else:
                self.result.label_writes += 1
        del unwritten[:count]
        self.writer_clock += count / self.write_rate

    def _refresh(self, replica: int) -> None:
        at = self.next_refresh[replica]
        if replica > 0:
            self.webhooks[replica].scoreboard.record(self.measurer.measure())
            return
        if self.installed and self.learning is not None and at >= self.next_learning:
            self.learning.update()  # learning.interval apart, as in the webhook
            self.next_learning = at + self.settings.learning.interval
        board = self.webhooks[0].scoreboard
        board.record(self.measurer.measure())
        self.lowest = int(np.argmin(self.source.measured(at)))
        if self.installed and self.strategy == "tiers" and board.snapshot is not None:
            self._write_labels(at)
            steering = self.settings.steering
            self.assigned = snapshot_tiers(
                board.snapshot, self.written, steering.default_pod_bandwidth, steering.busy_above
            )
            self.unwritten[:] = sorted(tier_changes(self.assigned, self.written).items())
            if self.labelled_at is None:
                self.labelled_at, self.first_labelling = at, len(self.unwritten)
            else:
                self.result.labelled_minutes = (at - self.labelled_at) / 60

    def _advance(self, to: float) -> None:
        """Refreshes and watch events due by ``to``, in time order."""
        events, next_refresh = self.events, self.next_refresh
        while True:
            due = events[0][0] if events else math.inf
            replica = int(np.argmin(next_refresh))
            if min(next_refresh[replica], due) > to:
                break
            if next_refresh[replica] <= due:
                self.now = next_refresh[replica]
                self._refresh(replica)
                next_refresh[replica] += REFRESH
            else:
                self.now, _, watch, line = heapq.heappop(events)
                watch.receive(line)
        self.now = to
        self._write_labels(to)

    def _stream(
        self,
        pod: dict[str, Any],
        times: PodTimes,
        bound: str | None,
        admitted_by: int,
        watches: Sequence[Reflector],
    ) -> None:
        """The pod's two events (stored, then bound; stored alone for a pod
        left Pending, ``bound`` None) to every replica's watch of
        ``watches``; with ``scenario.shown_at_admission`` the other replicas
        see it stored the instant it is admitted (the limit of any watch)."""
        scenario = self.scenario
        pod["metadata"]["creationTimestamp"] = time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(times.created))
        )
        added = event_line("ADDED", pod)
        events = [(times.created, added)]
        if bound is not None:
            pod["spec"]["nodeName"] = bound
            events.append((times.bound, event_line("MODIFIED", pod)))
        for replica, watch in enumerate(watches):
            for at, line in events:
                due = at + watch_latency(scenario.binding_delay, self.latency_rng)
                if scenario.shown_at_admission and line is added and replica != admitted_by:
                    due = times.admitted
                heapq.heappush(self.events, (due, next(self.sequence), watch, line))

    # -- one burst ----------------------------------------------------------

    def _draw_burst(self, number: int) -> Burst:
        scenario, rng, means = self.scenario, self.workload_rng, self.means
        installed = number >= scenario.running_bursts
        replicas = int(rng.integers(scenario.burst_sizes[0], scenario.burst_sizes[1] + 1))
        median = scenario.pod_median
        if not installed and scenario.running_pod_median is not None:
            median = scenario.running_pod_median
        if scenario.workloads is None:
            workload = f"workload-{number}"
            traffic = rng.lognormal(math.log(median), 0.5, replicas)
            mean = median * math.exp(0.5**2 / 2)  # of that lognormal
        else:
            # A returning Deployment (a scale-up: its ReplicaSet's pods are
            # added to those running), or a brand-new one; its pods send
            # around its own mean.
            if not means or rng.random() < scenario.new_workload_share:
                workload = f"deploy-{len(means)}"
                means[workload] = float(rng.lognormal(math.log(scenario.pod_median), 0.5))
            else:
                workload = str(rng.choice(sorted(means)[-scenario.workloads :]))
            traffic = rng.lognormal(math.log(means[workload]), 0.2, replicas)
            mean = means[workload] * math.exp(0.2**2 / 2)
        first = workload not in self.templates
        if installed:
            self.installed_workloads.add(workload)
        template = self.templates.setdefault(workload, f"{number:06x}")
        return Burst(number, workload, traffic, mean, installed, first, template=template)

    def _burst(self, burst: Burst) -> None:
        scenario, run = self.scenario, self.result
        if burst.installed and not self.installed:
            # The replicas start: each lists the pods running (the limit of a
            # list done before the first admission).
            for watch, line in itertools.product(self.unsteered, self.listed):
                watch.receive(line)
        self.installed = burst.installed
        acting = self.strategy if burst.installed else "oracle"
        burst_start = 60.0 + burst.number * 30.0
        timeline = scale_up(
            len(burst.traffic),
            burst_start,
            scenario.binding_delay,
            self.timing_rng,
            self.binding_rng,
        )
        for j, times in enumerate(timeline):
            self._advance(times.admitted)
            self._place(burst, j, times, acting)
        if burst.installed:
            run.burst_max.append(max(burst.counts.values(), default=0))
            run.burst_first_max.append(max(burst.firsts.values(), default=0))
            run.burst_sizes.append(len(burst.traffic))
            if acting in STEERED:
                delays = (w.inflight.watch_delay for w in self.webhooks)
                run.watch_delays.append(statistics.mean(delays))

    def _steer(self, burst: Burst, j: int) -> Steered:
        """The webhook's admission of the burst's pod ``j``, by one replica."""
        scenario = self.scenario
        annotations = {}
        if scenario.estimate_factor is not None:
            annotations["nettraffic.io/expected-bandwidth"] = (
                f"{burst.traffic[j] * scenario.estimate_factor:.0f}"
            )
        elif scenario.annotate_workload_mean:
            annotations["nettraffic.io/expected-bandwidth"] = f"{burst.mean:.0f}"
        admitted = pod_object(
            generate_name=f"{burst.workload}-{burst.template}-",
            labels={"app": burst.workload, "pod-template-hash": burst.template},
            annotations=annotations or None,
        )
        admitted_by = 0
        if len(self.webhooks) > 1:
            admitted_by = int(self.replica_rng.integers(len(self.webhooks)))
        decision = self.webhooks[admitted_by].steerer.decide(admitted, None, dry_run=False)
        stored = None
        if decision.patch is not None:
            admitted = stored = jsonpatch.apply_patch(admitted, decision.patch)
        # What kube-scheduler reads: the pod as the API server stores it.
        preferred, weights = scheduled_terms(admitted, self.index, self.tier_codes, self.zones)
        return Steered(preferred, weights, decision.booking_key, stored, admitted_by)

    def _oracle(self, workload: str, known: float) -> int | None:
        """The least-utilised link, the pod included, among the nodes it fits
        on; it keeps the workload's zone spread as kube-scheduler's default
        constraint asks (maxSkew 5)."""
        state = self.state
        allowed = state.fits(POD_CPU, POD_MEMORY) & zone_skew_allows(state, workload, MAX_SKEW_ZONE)
        fits = np.flatnonzero(allowed)
        after = (self.committed[fits] + known) / self.links[fits]
        chosen = int(fits[np.argmin(after)]) if len(fits) else None
        if chosen is not None:
            state.bind(chosen, workload, POD_CPU, POD_MEMORY)
        return chosen

    def _place(self, burst: Burst, j: int, times: PodTimes, acting: str) -> None:
        run, workload = self.result, burst.workload
        start_delay = float(self.start_rng.uniform(*START_DELAY))
        steered = Steered({})
        if acting == "tutorial" and self.lowest is not None:
            steered = Steered({self.lowest: 100})
        elif acting in STEERED:
            steered = self._steer(burst, j)
        preferred = steered.preferred
        first = max(preferred, key=lambda i: preferred[i]) if preferred else None
        if first is not None:
            burst.firsts[first] = burst.firsts.get(first, 0) + 1
        chosen: int | None
        if acting in ("oracle", ORACLE_MEAN):
            # Knowing the pod's traffic, or only its workload's mean.
            chosen = self._oracle(workload, burst.traffic[j] if acting == "oracle" else burst.mean)
        else:
            chosen = self.scheduler.schedule(
                workload, POD_CPU, POD_MEMORY, preferred, steered.label_weights
            )
            bound = None if chosen is None else self.names[chosen]
            if steered.booking and steered.admitted is not None:
                # steering.followBindings: every replica's watch sees it stored,
                # then bound (stored alone: left Pending).
                self.order += 1
                name = f"{workload}-{burst.template}-{self.order:05d}"
                steered.admitted["metadata"]["name"] = name
                self._stream(steered.admitted, times, bound, steered.admitted_by, self.watches)
            elif acting in STEERED and bound is not None:
                # Admitted without a booking: the watches of unsteered pods see it.
                self.order += 1
                pod = unsteered_pod(workload, burst.template, self.order)
                self._stream(pod, times, bound, steered.admitted_by, self.unsteered)
            if preferred:
                run.steered += 1
                run.preferred_scored += bool(set(preferred) & set(self.scheduler.last_scored))
                run.on_preferred += chosen in preferred
                run.on_first += chosen == first
        if chosen is None:
            run.pending += burst.installed
            return
        self._record(burst, j, chosen, times, start_delay)

    def _record(
        self, burst: Burst, j: int, chosen: int, times: PodTimes, start_delay: float
    ) -> None:
        run, installed = self.result, burst.installed
        hot = self.committed[chosen] / self.links[chosen] > HOT
        self.committed[chosen] += burst.traffic[j]
        placed = Placed(
            chosen,
            float(burst.traffic[j]),
            # Pods that ran before the install have sent for a whole window.
            times.admitted + start_delay if installed else -WINDOW,
            Workload("default", "Deployment", burst.workload),
            times.admitted if installed else -WINDOW - self.startup,
        )
        self.source.placements.append(placed)
        if not installed:
            self.order += 1
            pod = unsteered_pod(burst.workload, burst.template, self.order, self.names[chosen])
            self.listed.append(event_line("ADDED", pod))
            return
        run.hot += hot
        if burst.first:
            run.first_burst_pods += 1
            run.first_burst_hot += hot
        else:
            run.later_burst_pods += 1
            run.later_burst_hot += hot
        run.placements.append(placed)
        burst.counts[chosen] = burst.counts.get(chosen, 0) + 1
