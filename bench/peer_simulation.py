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
  learner has read that cluster for three passes. Then every workload is
  rolled out, in a drawn order, its pods replaced one at a time (the old
  one goes, the new one is admitted), two seconds apart; ROUNDS rollouts
  in all, each a new order. Metrics refresh every 15 s and the learner
  reads a pass every 30 s, from the cluster as it is then (instant rates,
  no 2 m window: a limit of the model).
"""

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import jsonpatch
import numpy as np

from bench.scheduler_model import ClusterState, KubeScheduler
from bench.simulated_pod_traffic import SimulatedPodTraffic
from bench.workload_spread import SpreadSummary, workload_spreads
from harness.fakeapi import node as node_object
from harness.reviews import pod as pod_object
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL, node_from_json
from kubectl_nettraffic.kube.pods import PREFERRED
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.peer_traffic import PeerReport, peers_from
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.schedule import PEERS
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.tier_labels import snapshot_tiers
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport

ZONES = 3
LINK = 1.25e9  # bytes/s each way: 10 Gbit/s
HOT = 0.8
POD_CPU, POD_MEMORY = 0.25, 0.5
PRICE = 0.01  # $ per GB each way: a byte across zones is billed twice
REFRESH, LEARN, STEP = 15.0, 30.0, 2.0
ROUNDS = 3
STRATEGIES = ("default", "nettraffic", "peers", "oracle")
ROLES = (
    ("front", 6, (3, 12)),
    ("service", 18, (2, 8)),
    ("store", 10, (1, 3)),
    ("shared", 6, (2, 6)),
)


@dataclass(frozen=True)
class Graph:
    names: list[str]
    replicas: list[int]
    pairs: dict[tuple[int, int], float]  # (i, j), i < j -> bytes/s both directions
    external: list[float]  # per pod, bytes/s out of the cluster


def draw_graph(rng: np.random.Generator, replica_factor: int) -> Graph:
    names, replicas, role_of = [], [], []
    for role, count, (low, high) in ROLES:
        for k in range(count):
            names.append(f"{role}-{k}")
            replicas.append(int(rng.integers(low, high + 1)) * replica_factor)
            role_of.append(role)
    index = {role: [i for i, r in enumerate(role_of) if r == role] for role, _, _ in ROLES}
    edges: set[tuple[int, int]] = set()
    for k, front in enumerate(index["front"]):
        calls = int(rng.integers(5, 9)) if k == 0 else int(rng.integers(2, 4))
        for service in rng.choice(index["service"], size=calls, replace=False):
            edges.add((front, int(service)))
    services = index["service"]
    for k, service in enumerate(services):
        later = services[k + 1 :] + index["store"]
        for target in rng.choice(later, size=int(rng.integers(1, 3)), replace=False):
            edges.add((service, int(target)))
    for shared in index["shared"]:
        for caller in range(len(names)):
            if role_of[caller] != "shared" and rng.random() < 0.3:
                edges.add((caller, shared))
    pairs = {
        (min(a, b), max(a, b)): float(min(200e6, rng.lognormal(math.log(2e6), 1.0)))
        for a, b in sorted(edges)
    }
    external = [
        float(rng.lognormal(math.log(5e6), 0.5)) if role == "front" else 0.0 for role in role_of
    ]
    return Graph(names, replicas, pairs, external)


# How a Service routes a client's connections (its trafficDistribution):
# kube-proxy's topologyModeFromHints (kubernetes/kubernetes
# pkg/proxy/topology.go) keeps a client on the endpoints hinted for its node
# when any is (PreferSameNode), else on those hinted for its zone when any is
# (PreferSameZone, and PreferSameNode's fallback: the EndpointSlice
# controller gives a PreferSameNode endpoint both hints,
# staging/src/k8s.io/endpointslice/trafficdist/trafficdist.go, update), else
# spreads over every endpoint.
SPREAD, SAME_ZONE, SAME_NODE = "spread", "PreferSameZone", "PreferSameNode"
ROUTINGS = (SPREAD, SAME_ZONE, SAME_NODE)


class Routes(NamedTuple):
    """Per node, for a client of one pair there, as the server's Service
    routes it (Cluster._routes)."""

    local: np.ndarray  # the share of its bytes that stays on the node
    across: np.ndarray  # ... that crosses zones
    on_node: np.ndarray  # it calls the servers on its node (PreferSameNode)
    zoned: np.ndarray  # ... those of its zone
    in_zone: np.ndarray  # the server's pods in the node's zone


@dataclass
class Cluster:
    """Where every pod runs: counts per workload and node; the link loads follow.
    In a pair (a, b), a < b, ``a`` calls ``b`` (draw_graph's edges all go to
    a later workload): ``b``'s Service routes as ``routing`` says."""

    graph: Graph
    background: np.ndarray  # bytes/s each way per node
    zone: np.ndarray
    counts: np.ndarray  # workload x node -> pods
    pods: list[list[int]] = field(default_factory=list)  # workload -> each pod's node
    routing: str = SPREAD

    def pair_cut(self) -> tuple[float, float]:
        """(bytes/s between pods on different nodes, between different zones)."""
        inter = cross = 0.0
        if self.routing != SPREAD:
            for pair, rate in self.graph.pairs.items():
                routes = self._routes(pair)
                clients = self.counts[pair[0]] * rate / self.graph.replicas[pair[0]]
                inter += float(clients @ (1 - routes.local))
                cross += float(clients @ routes.across)
            return inter, cross
        zone_counts = self.zone_counts()
        for (a, b), rate in self.graph.pairs.items():
            na, nb = self.graph.replicas[a], self.graph.replicas[b]
            per = rate / (na * nb)
            inter += per * (na * nb - float(self.counts[a] @ self.counts[b]))
            cross += per * (na * nb - float(zone_counts[a] @ zone_counts[b]))
        return inter, cross

    def zone_counts(self) -> np.ndarray:
        return np.stack([self.counts[:, self.zone == z].sum(axis=1) for z in range(ZONES)], axis=1)

    def _routes(self, pair: tuple[int, int]) -> Routes:
        """Per node, how the server's Service routes a client of ``pair``
        there (``routing``)."""
        servers = self.counts[pair[1]]
        total = float(servers.sum())
        in_zone = np.bincount(self.zone, weights=servers, minlength=ZONES)[self.zone]
        if not total:  # no server yet (its only pod being replaced): no bytes
            none = np.zeros(len(servers), bool)
            return Routes(np.ones(len(servers)), np.zeros(len(servers)), ~none, none, in_zone)
        on_node = (servers > 0) if self.routing == SAME_NODE else np.zeros(len(servers), bool)
        zoned = ~on_node & (in_zone > 0)
        local = np.where(on_node, 1.0, servers / np.where(zoned, in_zone, total))
        across = np.where(on_node | zoned, 0.0, 1 - in_zone / total)
        return Routes(local, across, on_node, zoned, in_zone)

    def link_load(self) -> np.ndarray:
        """Bytes/s each way on every node's link: background, the front ends'
        external bytes, half of each pod's bytes to pods on other nodes."""
        load = self.background.copy()
        graph = self.graph
        for w, ext in enumerate(graph.external):
            load += self.counts[w] * ext / 2
        for (a, b), rate in graph.pairs.items():
            if self.routing != SPREAD:
                load += self._routed_load((a, b), rate)
                continue
            na, nb = graph.replicas[a], graph.replicas[b]
            per = rate / (na * nb)
            load += (
                per
                * (self.counts[a] * (nb - self.counts[b]) + self.counts[b] * (na - self.counts[a]))
                / 2
            )
        return load

    def _routed_load(self, pair: tuple[int, int], rate: float) -> np.ndarray:
        """One pair's bytes each way on every node's link when its Service
        routes by topology: what the clients send off their node, and what
        the servers take from clients on other nodes."""
        a, b = pair
        routes = self._routes(pair)
        clients, servers = self.counts[a], self.counts[b]
        per_client = rate / self.graph.replicas[a]
        sent = clients * per_client * (1 - routes.local)
        # Each client's bytes split over the servers it routes to: those of
        # its zone (zone-routed), or all of them; none leave a node-routed one.
        zoned, spread = routes.zoned, ~routes.on_node & ~routes.zoned
        zone_clients = np.bincount(self.zone, weights=clients * zoned, minlength=ZONES)[self.zone]
        from_zone = (zone_clients - clients * zoned) * servers / np.maximum(routes.in_zone, 1.0)
        total = max(1.0, float(servers.sum()))
        from_all = (float(clients @ spread) - clients * spread) * servers / total
        return (sent + per_client * (from_zone + from_all)) / 2

    def pod_bytes(self, w: int) -> float:
        """One pod of workload ``w``: its bytes/s, both directions, all peers and out."""
        graph = self.graph
        return graph.external[w] + sum(
            rate / graph.replicas[w] for (a, b), rate in graph.pairs.items() if w in (a, b)
        )

    def node_load(self, node: int) -> float:
        """``link_load`` of one node."""
        if self.routing != SPREAD:
            return float(self.link_load()[node])
        graph, counts = self.graph, self.counts[:, node]
        load = float(self.background[node]) + float(counts @ np.array(graph.external)) / 2
        for (a, b), rate in graph.pairs.items():
            na, nb = graph.replicas[a], graph.replicas[b]
            load += (
                rate / (na * nb) * (counts[a] * (nb - counts[b]) + counts[b] * (na - counts[a])) / 2
            )
        return load

    def added_cost(self, w: int, weight: float) -> np.ndarray:
        """Per node: the bytes/s across nodes, plus ``weight`` x across zones,
        that one more pod of ``w`` there would add (the oracle's measure)."""
        if self.routing != SPREAD:
            return self._routed_added_cost(w, weight)
        graph, cost = self.graph, np.zeros(len(self.zone))
        zone_counts = self.zone_counts()
        for (a, b), rate in graph.pairs.items():
            if w not in (a, b):
                continue
            peer = b if w == a else a
            per = rate / (graph.replicas[w] * graph.replicas[peer])
            cost += per * (graph.replicas[peer] - self.counts[peer])
            cost += weight * per * (graph.replicas[peer] - zone_counts[peer][self.zone])
        return cost

    def _routed_added_cost(self, w: int, weight: float) -> np.ndarray:
        cost = np.zeros(len(self.zone))
        for (a, b), rate in self.graph.pairs.items():
            per_client = rate / self.graph.replicas[a]
            if w == a:  # one more client: where its Service sends it
                routes = self._routes((a, b))
                cost += per_client * (1 - routes.local + weight * routes.across)
            elif w == b:  # one more server: what it saves the clients near it
                cost += per_client * self._server_saving(self.counts[a], self.counts[b], weight)
        return cost

    def _server_saving(self, clients: np.ndarray, servers: np.ndarray, weight: float) -> np.ndarray:
        """Per node, the change in the pair's clients' cut (bytes a client pod
        sends, per unit) when one more server runs there. Only the clients of
        that node's zone change route: a zone without servers had all its
        clients' bytes cross zones; once it has one, none do. A negative
        change is a saving."""
        zone = self.zone
        in_zone = np.bincount(zone, weights=servers, minlength=ZONES)[zone]
        zone_clients = np.bincount(zone, weights=clients, minlength=ZONES)[zone]
        if not servers.sum():  # the first server: every client's bytes start
            return zone_clients - clients + (1 + weight) * (clients.sum() - zone_clients)
        first_in_zone = -(clients + weight * zone_clients)
        if self.routing == SAME_NODE:
            here = np.where(servers > 0, 0.0, -clients)
        else:
            beside = np.bincount(zone, weights=clients * servers, minlength=ZONES)[zone]
            here = beside / np.maximum(in_zone, 1.0) - (beside + clients) / (in_zone + 1)
        return np.where(in_zone > 0, here, first_in_zone)

    def place(self, w: int, node: int) -> None:
        self.counts[w, node] += 1

    def remove(self, w: int, node: int) -> None:
        self.counts[w, node] -= 1


@dataclass
class Outcome:
    inter_node: float  # bytes/s
    cross_zone: float
    busiest: float  # the busiest link's utilisation
    # Its workloads' spread over zones and nodes at the end (bench/workload_spread.py).
    spread: SpreadSummary = field(default_factory=lambda: SpreadSummary(0.0, 0.0, 0.0, 0.0))
    placed: int = 0
    hot: int = 0
    pending: int = 0


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


class SimulatedFlows:
    """The learner's flow reader: the pairs as Istio's series would carry
    them (one reporter), matched by the product's own peers_from."""

    def __init__(self, graph: Graph, settings: Settings) -> None:
        self.graph, self.settings = graph, settings

    def read(self, known: Iterable[Workload], at: float) -> PeerReport:
        result = [
            {
                "metric": {
                    "source_workload": self.graph.names[a],
                    "source_workload_namespace": "default",
                    "destination_workload": self.graph.names[b],
                    "destination_workload_namespace": "default",
                },
                "value": [0, f"{rate:.3f}"],
            }
            for (a, b), rate in self.graph.pairs.items()
        ]
        return peers_from(result, known, self.settings.peers.max_per_workload)


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
    rng = np.random.default_rng(seed)
    background, state = draw_cluster(nodes, rng)
    graph = draw_graph(rng, replica_factor)
    names = [f"node-{i:03d}" for i in range(nodes)]
    cluster = Cluster(
        graph, background, state.zone, np.zeros((len(graph.names), nodes)), routing=options.routing
    )
    scheduler = KubeScheduler(
        state,
        np.random.default_rng(seed + 1),
        zone_spread=options.zone_spread,
        zone_max_skew=options.zone_max_skew,
    )
    # Before the install: kube-scheduler alone, every workload in a drawn order.
    for w in rng.permutation(len(graph.names)):
        for _ in range(graph.replicas[w]):
            chosen = scheduler.schedule(graph.names[w], POD_CPU, POD_MEMORY, {})
            if chosen is not None:
                cluster.place(int(w), chosen)
    cluster.pods = [
        [int(n) for n in np.repeat(np.arange(nodes), cluster.counts[w].astype(int))]
        for w in range(len(graph.names))
    ]
    orders = [rng.permutation(len(graph.names)) for _ in range(ROUNDS)]
    return _roll_out(cluster, state, scheduler, names, orders, strategy, options.pull_points)


def _roll_out(
    cluster: Cluster,
    state: ClusterState,
    scheduler: KubeScheduler,
    names: list[str],
    orders: list[np.ndarray],
    strategy: str,
    pull_points: float | None,
) -> Outcome:
    graph = cluster.graph
    now = [0.0]
    steered = strategy in ("nettraffic", "peers")
    settings = _settings(strategy == "peers", pull_points)
    # Each node's zone, and its copy as the tier label writer writes it with
    # a flow source (measuring/tier_labels.py).
    zone_labels = [
        {ZONE_LABEL: f"zone-{z}", **({ZONE_COPY_LABEL: f"zone-{z}"} if strategy == "peers" else {})}
        for z in cluster.zone
    ]
    node_objects = [
        node_from_json(node_object(name, labels=labels))
        for name, labels in zip(names, zone_labels, strict=True)
    ]
    generation = [0]

    def pod_rates() -> PodTrafficReport:
        samples = []
        for w, nodes_of in enumerate(cluster.pods):
            rate = cluster.pod_bytes(w)
            for k, node in enumerate(nodes_of):
                samples.append(
                    PodSample(
                        "default",
                        f"{graph.names[w]}-{generation[0]:x}-{k}",
                        rate / 2,
                        rate / 2,
                        Workload("default", "Deployment", graph.names[w]),
                        None,
                        names[node],
                    )
                )
        return PodTrafficReport(tuple(samples), (), 0, now[0])

    def traffic(_nodes: object) -> TrafficReport:
        load = cluster.link_load()
        by_node = {
            name: NodeTraffic(v, v, LINK, ("sim",)) for name, v in zip(names, load, strict=True)
        }
        return TrafficReport(by_node, (), (), {}, (), now[0])

    learning = None
    if steered:
        learning = BandwidthLearning(
            settings,
            SimulatedPodTraffic(pod_rates, lambda: {}, settings.learning.young_workload_age),
            clock=lambda: now[0],
            peers=SimulatedFlows(graph, settings) if strategy == "peers" else None,
        )
        for _ in range(4):  # a count, then three passes over the running cluster
            learn(learning)
    source: Any = _Fetch(traffic)  # what PrometheusSource.fetch answers
    measurer = Measurer(
        settings, lambda: node_objects, source, None, clock=lambda: now[0], learning=learning
    )
    serving = serving_parts(settings, clock=lambda: now[0])
    # The traffic-tier labels (steering.trafficTiers, on by default) as the
    # leader writes them at each refresh; the scheduler model weighs each
    # node by the terms of the patched pod it matches.
    tiers: dict[str, str] = {}

    def refresh() -> None:
        nonlocal tiers
        serving.scoreboard.record(measurer.measure())
        snapshot = serving.scoreboard.snapshot
        if steered and snapshot is not None:
            tiers = snapshot_tiers(snapshot, tiers, settings.steering.default_pod_bandwidth)
            for name, labels in zip(names, zone_labels, strict=True):
                labels.pop(TIER_LABEL, None)
                if name in tiers:
                    labels[TIER_LABEL] = tiers[name]

    refresh()
    next_refresh, next_learning = REFRESH, LEARN
    outcome = Outcome(0.0, 0.0, 0.0)
    for round_number, order in enumerate(orders):
        for w in order:
            w = int(w)
            template = f"{round_number + 1:06x}"
            for k in range(len(cluster.pods[w])):
                now[0] += STEP
                if learning is not None and now[0] >= next_learning:
                    learn(learning)
                    next_learning += LEARN
                if now[0] >= next_refresh:
                    refresh()
                    next_refresh += REFRESH
                old = cluster.pods[w][k]
                cluster.remove(w, old)
                state.unbind(old, graph.names[w], POD_CPU, POD_MEMORY)
                chosen = _choose(
                    strategy, cluster, state, scheduler, serving, w, template, zone_labels
                )
                if chosen is None:
                    outcome.pending += 1
                    cluster.place(w, old)  # the old one stays (maxUnavailable 0)
                    state.bind(old, graph.names[w], POD_CPU, POD_MEMORY)
                    continue
                cluster.place(w, chosen)
                cluster.pods[w][k] = chosen
                outcome.placed += 1
                outcome.hot += cluster.node_load(chosen) / LINK > HOT
            generation[0] += 1
    inter, cross = cluster.pair_cut()
    return replace(
        outcome,
        inter_node=inter,
        cross_zone=cross,
        busiest=float(cluster.link_load().max() / LINK),
        spread=SpreadSummary.of(workload_spreads(state, graph.names)),
    )


class _Fetch:
    def __init__(self, fetch: Callable[[object], TrafficReport]) -> None:
        self.fetch = fetch


def _choose(
    strategy: str,
    cluster: Cluster,
    state: ClusterState,
    scheduler: KubeScheduler,
    serving: object,
    w: int,
    template: str,
    node_labels: list[dict[str, str]],
) -> int | None:
    graph = cluster.graph
    name = graph.names[w]
    if strategy == "oracle":
        fits = np.flatnonzero(state.fits(POD_CPU, POD_MEMORY))
        if not len(fits):
            return None
        load = cluster.link_load()
        after = (load + cluster.pod_bytes(w) / 2) / LINK
        cool = fits[after[fits] <= HOT]
        candidates = cool if len(cool) else fits
        cost = cluster.added_cost(w, 1.0)[candidates]
        best = candidates[np.lexsort((after[candidates], cost))[0]]
        state.bind(int(best), name, POD_CPU, POD_MEMORY)
        return int(best)
    preferred: dict[int, int] = {}
    if strategy in ("nettraffic", "peers"):
        admitted = pod_object(
            generate_name=f"{name}-{template}-",
            labels={"app": name, "pod-template-hash": template},
        )
        decision = serving.steerer.decide(admitted, None, dry_run=False)  # type: ignore[attr-defined]
        patched = jsonpatch.apply_patch(admitted, decision.patch or [])
        preferred, label_weights = node_affinity_terms(patched, node_labels)
        return scheduler.schedule(name, POD_CPU, POD_MEMORY, preferred, label_weights)
    return scheduler.schedule(name, POD_CPU, POD_MEMORY, preferred)


def node_affinity_terms(
    pod: dict[str, Any], node_labels: list[dict[str, str]]
) -> tuple[dict[int, int], np.ndarray]:
    """What kube-scheduler's NodeAffinity scores from the patched pod's
    preferred terms: one-node terms by node index, and per node the weights
    of the label terms (``In`` expressions) it matches
    (nodeaffinity/node_affinity.go, Score)."""
    preferred: dict[int, int] = {}
    weights = np.zeros(len(node_labels), dtype=np.int64)
    affinity = (pod["spec"].get("affinity") or {}).get("nodeAffinity") or {}
    for term in affinity.get(PREFERRED) or []:
        preference = term["preference"]
        for field_ in preference.get("matchFields") or []:
            for name in field_["values"]:
                node = int(name.removeprefix("node-"))
                preferred[node] = preferred.get(node, 0) + term["weight"]
        expressions = preference.get("matchExpressions") or []
        if expressions:
            for node, labels in enumerate(node_labels):
                if all(labels.get(e["key"]) in e["values"] for e in expressions):
                    weights[node] += term["weight"]
    return preferred, weights
