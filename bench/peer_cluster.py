"""The peers benchmark's service graph and the cluster its pods run in:
the workloads and the bytes between them (Graph), how a Service routes a
client's connections, and each node's and zone's load and the pairs' cut
as the pods stand (Cluster)."""

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

ZONES = 3
LINK = 1.25e9  # bytes/s each way: 10 Gbit/s
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

    def pod_bytes(self, w: int) -> float:
        """One pod of workload ``w``: its bytes/s, both directions, all peers and out."""
        return self.external[w] + sum(
            rate / self.replicas[w] for (a, b), rate in self.pairs.items() if w in (a, b)
        )


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

    def place(self, w: int, node: int) -> None:
        self.counts[w, node] += 1

    def remove(self, w: int, node: int) -> None:
        self.counts[w, node] -= 1
