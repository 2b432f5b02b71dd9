"""The peers benchmark's simulation: a service graph's pods over three zones,
rolled out workload by workload, placed by one strategy; driven by the real
engine (Measurer, the learner with the flow query's matching, Scoreboard,
Steerer and its in-flight bookings, as serving.py wires them) with
kube-scheduler as bench/scheduler_model.py models it.

The model (bench/peers.py prints it beside the figures):
- 40 workloads: 6 front ends, 18 services, 10 stores, 6 shared services.
  Each front end calls 2-3 services (chains), the first one 5-8 (fan-out);
  each service calls 1-2 later services or stores; each shared service is
  called by every other workload with probability 0.3 (fan-in). A pair's
  bytes/s (both directions) are log-normal, median 2 MB/s, sigma 1.
  Replicas: front ends 3-12, services 2-8, stores 1-3, shared 2-6, times
  four at 500 nodes. Front ends also send 5 MB/s (median) per pod out of
  the cluster.
- A Service spreads a client's connections evenly over its endpoints, so
  a pair's bytes split evenly over the pairs of their pods; bytes between
  two pods on one node touch no link. Or, with a trafficDistribution
  (SimulationOptions.routing), kube-proxy keeps a client on its node's or
  its zone's server pods (Cluster).
- Nodes: 10 Gbit/s links, zone = node index mod 3, background load as in
  bench.placement (log-normal around 12%; 5% of nodes at 75-95%).
- Before the install every pod was placed by kube-scheduler alone; the
  learner has read that cluster for three passes, and the webhook's watch
  of the pods no replica steered has listed them. Then every workload is
  rolled out, in a drawn order, its pods replaced one at a time (the old
  one goes, the new one is admitted), two seconds apart; ROUNDS rollouts
  in all, each a new order. Metrics refresh every 15 s and the learner
  reads a pass every 30 s, from the cluster as it is then (instant rates,
  no 2 m window: a limit of the model).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import jsonpatch
import numpy as np

from bench.labelled_nodes import labelled_nodes
from bench.peer_cluster import LINK, SAME_NODE, SAME_ZONE, SPREAD, ZONES, Cluster, Graph, draw_graph
from bench.pod_events import event_line, unsteered_pod
from bench.scheduler_model import (
    MAX_SKEW_HOSTNAME,
    ClusterState,
    KubeScheduler,
    node_affinity_terms,
)
from bench.simulated_flows import SimulatedFlows
from bench.simulated_pod_traffic import SimulatedPodTraffic
from bench.workload_spread import ZONE_KEEPING_PODS, SpreadSummary, spreads_of
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import Settings, SteeringSettings, settings_from_mapping
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL
from kubectl_nettraffic.kube.pods import STEERED_BY
from kubectl_nettraffic.kube.service_routing import NODE, ZONE, ServiceRouting
from kubectl_nettraffic.kube.unsteered_pods import UnsteeredPods
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.schedule import PEERS
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.tier_labels import snapshot_tiers
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.spread import HOSTNAME_KEY, ZONE_KEY
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport

HOT = 0.8
BUSY = SteeringSettings().busy_above  # the product's default: a link past it costs a pod
POD_CPU, POD_MEMORY = 0.25, 0.5
PRICE = 0.01  # $ per GB each way: a byte across zones is billed twice
REFRESH, LEARN, STEP = 15.0, 30.0, 2.0
ROUNDS = 3
# The ReplicaSet the running pods belong to before the first rollout (pod-template-hash).
FIRST_TEMPLATE = f"{0:06x}"
STRATEGIES = ("default", "nettraffic", "peers")
REPLICA = "peers-sim"  # the webhook replica's id (nettraffic.io/steered-by)


@dataclass
class Outcome:
    inter_node: float  # bytes/s
    cross_zone: float
    busiest: float  # the busiest link's utilisation
    # Its workloads' spread over zones and nodes at the end (bench/workload_spread.py).
    spread: SpreadSummary = field(default_factory=lambda: SpreadSummary(0.0, 0.0, 0.0, 0.0))
    # Per workload of ZONE_KEEPING_PODS pods or more, the zones without one.
    zones_missing: dict[str, int] = field(default_factory=dict)
    placed: int = 0
    hot: int = 0
    pending: int = 0
    # Steered pods bound elsewhere than kube-scheduler alone would have
    # bound them at that moment, where its own pick's link would have been
    # at most steering.busyAbove full with the pod (calm: the product's
    # model sees nothing to save), or past it but not hot (busy).
    moved_calm: int = 0
    moved_busy: int = 0


def draw_cluster(nodes: int, rng: np.random.Generator) -> tuple[np.ndarray, ClusterState]:
    utilisation = np.clip(rng.lognormal(math.log(0.12), 0.6, nodes), 0.01, 0.6)
    hot = rng.choice(nodes, size=max(1, round(nodes * 0.05)), replace=False)
    utilisation[hot] = rng.uniform(0.75, 0.95, len(hot))
    state = ClusterState(
        cpu_allocatable=np.full(nodes, 16.0),
        memory_allocatable=np.full(nodes, 64.0),
        cpu_requested=rng.uniform(0.2, 0.6, nodes) * 16,
        memory_requested=rng.uniform(0.2, 0.6, nodes) * 64,
        zone=np.arange(nodes) % ZONES,
    )
    return utilisation * LINK, state


def _settings(peers: bool, pull_points: float | None = None) -> Settings:
    chosen: dict[str, object] = {"source": "istio" if peers else "none"}
    if pull_points is not None:
        chosen["pullPoints"] = pull_points
    return settings_from_mapping(
        {"prometheus": {"url": "http://sim"}, "metricsServer": {"enabled": False}, "peers": chosen}
    )


def learn(learning: BandwidthLearning) -> None:
    """One learning round, and the pairs when the pass it ended made them
    due: the learner's thread runs that round at once when the budget has
    room, as it has here (the simulated reads take no time)."""
    learning.update()
    if learning.next_round()[0] == PEERS:
        learning.update()


@dataclass(frozen=True)
class SimulationOptions:
    """A variant of the model: how pods are spread, how Services route, and
    the peers' settings."""

    # False: every pod carries a topology spread constraint per hostname
    # alone, so kube-scheduler's default one per zone does not apply
    # (bench/scheduler_model.py).
    zone_spread: bool = True
    routing: str = SPREAD  # every Service's trafficDistribution (ROUTINGS)
    # Every pod also carries a zone constraint with this maxSkew, DoNotSchedule.
    zone_max_skew: int | None = None
    pull_points: float | None = None  # peers.pullPoints (None: the default)
    # kube-scheduler's draw for its ties (seed + ties): another one shows how
    # far kube-scheduler alone moves between runs of one draw.
    ties: int = 1


def draw(
    nodes: int, replica_factor: int, seed: int
) -> tuple[np.random.Generator, np.ndarray, ClusterState, Graph]:
    """One draw's cluster before the service graph's pods (its background
    link load and requests) and the graph; the generator, to draw on."""
    rng = np.random.default_rng(seed)
    background, state = draw_cluster(nodes, rng)
    return rng, background, state, draw_graph(rng, replica_factor)


def simulate(
    nodes: int,
    replica_factor: int,
    strategy: str,
    seed: int,
    options: SimulationOptions | None = None,
) -> Outcome:
    """One draw (``seed``) placed by ``strategy``; the same draw for every
    strategy."""
    options = options or SimulationOptions()
    rng, background, state, graph = draw(nodes, replica_factor, seed)
    names = [f"node-{i:03d}" for i in range(nodes)]
    cluster = Cluster(
        graph, background, state.zone, np.zeros((len(graph.names), nodes)), routing=options.routing
    )
    scheduler = KubeScheduler(
        state,
        np.random.default_rng(seed + options.ties),
        zone_spread=options.zone_spread,
        zone_max_skew=options.zone_max_skew,
    )
    # Before the install: kube-scheduler alone, every workload in a drawn order.
    for w in rng.permutation(len(graph.names)):
        group = spread_group(scheduler, f"{graph.names[w]}-{FIRST_TEMPLATE}", graph.names[w])
        for _ in range(graph.replicas[w]):
            chosen = scheduler.schedule(group, POD_CPU, POD_MEMORY, {})
            if chosen is not None:
                cluster.place(int(w), chosen)
    cluster.pods = [
        [int(n) for n in np.repeat(np.arange(nodes), cluster.counts[w].astype(int))]
        for w in range(len(graph.names))
    ]
    orders = [rng.permutation(len(graph.names)) for _ in range(ROUNDS)]
    return RollOut(cluster, state, scheduler, names, strategy, options.pull_points).run(orders)


class RollOut:
    """Every workload rolled out by ``strategy``, one pod at a time, with
    the engine (Measurer, learner, Scoreboard, Steerer) on a simulated clock."""

    def __init__(
        self,
        cluster: Cluster,
        state: ClusterState,
        scheduler: KubeScheduler,
        names: list[str],
        strategy: str,
        pull_points: float | None,
    ) -> None:
        self.cluster, self.state, self.scheduler = cluster, state, scheduler
        self.names, self.strategy = names, strategy
        self.now = 0.0
        self.generation = 0
        # Each pod's ReplicaSet, as kube-state-metrics' kube_pod_owner names it.
        self.owners = [
            [f"{name}-{FIRST_TEMPLATE}"] * len(pods)
            for name, pods in zip(cluster.graph.names, cluster.pods, strict=True)
        ]
        self.steered = strategy in ("nettraffic", "peers")
        self.constraints = own_constraints(scheduler)
        self.settings = settings = _settings(strategy == "peers", pull_points)
        # Each node's zone, and its copy as the tier label writer writes it
        # (measuring/tier_labels.py; it runs where pods are steered).
        self.zone_labels = [
            {
                ZONE_LABEL: f"zone-{z}",
                **({ZONE_COPY_LABEL: f"zone-{z}"} if self.steered else {}),
            }
            for z in cluster.zone
        ]
        self.learning = None
        if self.steered:
            self.learning = BandwidthLearning(
                settings,
                SimulatedPodTraffic(
                    self._pod_rates, lambda: {}, settings.learning.young_workload_age
                ),
                clock=lambda: self.now,
                peers=SimulatedFlows(cluster.graph, settings) if strategy == "peers" else None,
                services=self._service_routing,
            )
            for _ in range(4):  # a count, then three passes over the running cluster
                learn(self.learning)
        source: Any = _Fetch(self._traffic)  # what PrometheusSource.fetch answers
        self.measurer = Measurer(
            settings,
            lambda: labelled_nodes(self.names, self.zone_labels),
            source,
            None,
            clock=lambda: self.now,
            learning=self.learning,
        )
        self.serving = serving_parts(settings, clock=lambda: self.now, replica=REPLICA)
        # The replica's binding watch: each steered pod's booking moves to the
        # node it was bound to (kube/binding_watch.py). The pod's bound event
        # reaches it before the next admission: the watch's delay is tens of
        # ms (bench/control_plane.py, watch_latency), the pods two seconds apart.
        self.watch = BindingWatch(None, self.serving.inflight, REPLICA, clock=lambda: self.now)  # type: ignore[arg-type]
        # The watch of the pods no replica steered (kube/unsteered_pods.py)
        # lists those that ran before the install; with both listed, the
        # peers' pull reads where their pods run now (serving.py).
        self.unsteered = UnsteeredPods(None, self.serving.inflight)  # type: ignore[arg-type]
        # (workload, pod) -> the pod as the API server holds it: its deletion
        # is shown to its watch when a rollout replaces it.
        self.objects: dict[tuple[int, int], dict] = {}
        if self.steered:
            for w, nodes_of in enumerate(cluster.pods):
                for k, node in enumerate(nodes_of):
                    number = len(self.objects)
                    pod = unsteered_pod(cluster.graph.names[w], FIRST_TEMPLATE, number, names[node])
                    self.objects[(w, k)] = pod
                    self._watched("ADDED", pod)
            # Both listed: the watches keep the places from here on.
            self.watch.synced.set()
            self.unsteered.synced.set()
            self.serving.inflight.follow_places(self.watch.synced, self.unsteered.synced)
        # The traffic-tier labels (steering.trafficTiers, on by default) as the
        # leader writes them at each refresh; the scheduler model weighs each
        # node by the terms of the patched pod it matches.
        self.tiers: dict[str, str] = {}

    def _pod_rates(self) -> PodTrafficReport:
        cluster, graph, names = self.cluster, self.cluster.graph, self.names
        samples = []
        for w, nodes_of in enumerate(cluster.pods):
            rate = graph.pod_bytes(w)
            for k, node in enumerate(nodes_of):
                samples.append(
                    PodSample(
                        "default",
                        f"{graph.names[w]}-{self.generation:x}-{k}",
                        rate / 2,
                        rate / 2,
                        Workload("default", "Deployment", graph.names[w]),
                        None,
                        names[node],
                        self.owners[w][k],
                    )
                )
        return PodTrafficReport(tuple(samples), (), 0, self.now)

    def _service_routing(self) -> ServiceRouting:
        """What the learner reads of the Services (kube/service_routing.py):
        every called workload's pods routed as the cluster's Services route."""
        routed = {SAME_ZONE: ZONE, SAME_NODE: NODE}.get(self.cluster.routing)
        if routed is None:
            return ServiceRouting()
        graph, pods = self.cluster.graph, {}
        # The pods as the learner's pass named them: a rollout since renamed
        # some (their generation), so the last few generations' names.
        generations = range(max(0, self.generation - 3), self.generation + 1)
        for w in {server for _, server in graph.pairs}:
            for k in range(len(self.cluster.pods[w])):
                for g in generations:
                    pods["default", f"{graph.names[w]}-{g:x}-{k}"] = routed
        return ServiceRouting(pods)

    def _traffic(self, _nodes: object) -> TrafficReport:
        load = self.cluster.link_load()
        by_node = {
            name: NodeTraffic(v, v, LINK, ("sim",))
            for name, v in zip(self.names, load, strict=True)
        }
        return TrafficReport(by_node, (), (), {}, (), self.now)

    def _refresh(self) -> None:
        board = self.serving.scoreboard
        board.record(self.measurer.measure())
        snapshot = board.snapshot
        if self.steered and snapshot is not None:
            steering = self.settings.steering
            self.tiers = snapshot_tiers(
                snapshot, self.tiers, steering.default_pod_bandwidth, steering.busy_above
            )
            for name, labels in zip(self.names, self.zone_labels, strict=True):
                labels.pop(TIER_LABEL, None)
                if name in self.tiers:
                    labels[TIER_LABEL] = self.tiers[name]

    def run(self, orders: list[np.ndarray]) -> Outcome:
        cluster, learning = self.cluster, self.learning
        self._refresh()
        next_refresh, next_learning = REFRESH, LEARN
        outcome = Outcome(0.0, 0.0, 0.0)
        for round_number, order in enumerate(orders):
            for w in order:
                w = int(w)
                template = f"{round_number + 1:06x}"
                for k in range(len(cluster.pods[w])):
                    self.now += STEP
                    if learning is not None and self.now >= next_learning:
                        learn(learning)
                        next_learning += LEARN
                    if self.now >= next_refresh:
                        self._refresh()
                        next_refresh += REFRESH
                    self._replace(outcome, w, k, template)
                self.generation += 1
        inter, cross = cluster.pair_cut()
        return replace(
            outcome,
            inter_node=inter,
            cross_zone=cross,
            busiest=float(cluster.link_load().max() / LINK),
            **spread_of(self.state.zone, cluster.counts, cluster.graph.names),
        )

    def _replace(self, outcome: Outcome, w: int, k: int, template: str) -> None:
        """Workload ``w``'s pod ``k`` replaced: the old one goes, the new one is placed."""
        cluster, state, name = self.cluster, self.state, self.cluster.graph.names[w]
        old = cluster.pods[w][k]
        cluster.remove(w, old)
        old_group = spread_group(self.scheduler, self.owners[w][k], name)
        state.unbind(old, old_group, POD_CPU, POD_MEMORY)
        self._watched("DELETED", self.objects.pop((w, k), None))
        own = self._own_pick(w, template) if self.steered else None
        chosen = self._schedule(w, k, template)
        if chosen is None:
            outcome.pending += 1
            cluster.place(w, old)  # the old one stays (maxUnavailable 0)
            state.bind(old, old_group, POD_CPU, POD_MEMORY)
            return
        cluster.place(w, chosen)
        cluster.pods[w][k] = chosen
        self.owners[w][k] = f"{name}-{template}"
        outcome.placed += 1
        outcome.hot += cluster.node_load(chosen) / LINK > HOT
        if own is not None and own[0] != chosen:
            outcome.moved_calm += own[1] <= BUSY
            outcome.moved_busy += BUSY < own[1] <= HOT

    def _own_pick(self, w: int, template: str) -> tuple[int, float] | None:
        """Where kube-scheduler alone would bind workload ``w``'s new pod
        now, and that node's link utilisation with the pod; None: nowhere."""
        name, cluster = self.cluster.graph.names[w], self.cluster
        group = spread_group(self.scheduler, f"{name}-{template}", name)
        own = self.scheduler.would_pick(group, POD_CPU, POD_MEMORY)
        if own is None:
            return None
        cluster.place(w, own)
        utilisation = cluster.node_load(own) / LINK
        cluster.remove(w, own)
        return own, utilisation

    def _schedule(self, w: int, k: int, template: str) -> int | None:
        """Workload ``w``'s new pod placed by the strategy: kube-scheduler
        alone, or the webhook's patch, then kube-scheduler, then the
        binding watch."""
        scheduler, name = self.scheduler, self.cluster.graph.names[w]
        group = spread_group(scheduler, f"{name}-{template}", name)
        if self.strategy == "default":
            return scheduler.schedule(group, POD_CPU, POD_MEMORY, {})
        admitted = pod_object(
            generate_name=f"{name}-{template}-",
            labels={"app": name, "pod-template-hash": template},
        )
        if self.constraints is not None:
            selector = {"matchLabels": {"app": name}}
            admitted["spec"]["topologySpreadConstraints"] = [
                {**constraint, "labelSelector": selector} for constraint in self.constraints
            ]
        decision = self.serving.steerer.decide(admitted, None, dry_run=False)
        patched = jsonpatch.apply_patch(admitted, decision.patch or [])
        preferred, label_weights = node_affinity_terms(patched, self.zone_labels)
        chosen = scheduler.schedule(group, POD_CPU, POD_MEMORY, preferred, label_weights)
        if chosen is not None:
            patched["metadata"]["name"] = f"{name}-{template}-{k}"
            patched["spec"]["nodeName"] = self.names[chosen]
            self._watched("MODIFIED", patched)
            self.objects[(w, k)] = patched
        return chosen

    def _watched(self, kind: str, pod: dict | None) -> None:
        """``pod``'s watch shown its event, as the API server writes it."""
        if pod is not None:
            watch = self.watch if STEERED_BY in pod["metadata"]["labels"] else self.unsteered
            watch.receive(event_line(kind, pod))


def spread_group(scheduler: KubeScheduler, owner: str, workload: str) -> str:
    """The pods a pod's topology spread counts, as the scheduler model
    keys them: under the cluster's default constraints its ReplicaSet's
    (``owner``): kube-scheduler selects them by helper/spread.go's
    DefaultSelector, which adds the ReplicaSet's selector, and a
    Deployment's ReplicaSet selects by pod-template-hash; under the pods'
    own constraints (own_constraints, labelSelector ``app``) the
    ``workload``'s, every ReplicaSet's."""
    return owner if scheduler.zone_spread else workload


def own_constraints(scheduler: KubeScheduler) -> list[dict[str, Any]] | None:
    """The topologySpreadConstraints every pod carries in the variant
    ``scheduler`` models, for the webhook to read as kube-scheduler does
    (None: the pods carry none, and the cluster's defaults apply)."""
    if scheduler.zone_spread:
        return None
    hostname = {
        "topologyKey": HOSTNAME_KEY,
        "maxSkew": MAX_SKEW_HOSTNAME,
        "whenUnsatisfiable": "ScheduleAnyway",
    }
    if scheduler.zone_max_skew is None:
        return [hostname]
    zone = {
        "topologyKey": ZONE_KEY,
        "maxSkew": scheduler.zone_max_skew,
        "whenUnsatisfiable": "DoNotSchedule",
    }
    return [zone, hostname]


def spread_of(zone: np.ndarray, counts: np.ndarray, names: list[str]) -> dict[str, Any]:
    """Outcome's spread fields for a placement (workload x node -> pods)."""
    spreads = spreads_of(zone, dict(zip(names, counts, strict=True)), names)
    return {
        "spread": SpreadSummary.of(spreads),
        "zones_missing": {
            s.workload: s.zones_missing for s in spreads if s.pods >= ZONE_KEEPING_PODS
        },
    }


class _Fetch:
    def __init__(self, fetch: Callable[[object], TrafficReport]) -> None:
        self.fetch = fetch
