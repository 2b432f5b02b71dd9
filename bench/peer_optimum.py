"""The best any placement can do in bench.peers' model, from an exact
solver (HiGHS, a mixed-integer program): every pod of the service graph
placed at once, under the rules every placement in the benchmark meets or
is judged by.

The rules:
- a node takes pods while they fit (every pod asks the same CPU and
  memory, so a node has a number of free slots);
- a node's link stays at most HOT busy, counting each pod's whole bytes
  as if none stayed on the node (the product's own guard, peer_pull.py
  "Never past hot": the true load is at most this under spread routing);
  a node past HOT already takes none;
- the fan-in cap: a node holds at most half of a workload's pods (one,
  for a workload of three or fewer), and no more than the hostname
  spread's maxSkew (3, the default constraint, which the product keeps;
  every workload has fewer pods than there are nodes, so the node with
  fewest holds none);
- a workload of ZONE_KEEPING_PODS pods or more keeps a pod in every zone;
- a workload's zones differ by at most the zone spread's maxSkew, where
  its pods carry one (the cluster's default, 5, which the product keeps).

What it minimises depends on how the Services route (peer_cluster.py):
- spread or PreferSameZone: the bytes across zones;
- PreferSameNode: the bytes across nodes.
Each is exact in the model (Cluster.pair_cut gives the same figure for
the placement found); the products of two counts are written out with one
count in unary (binary steps), so the program stays linear.

Where the solver runs out of time the best placement found is kept and its
bound (the best any placement could still reach) is reported beside it.
Under PreferSameNode at 500 nodes the solver's own bound is no help: its
linear relaxation alone takes longer than the time given, so it stays at
0. There the bound is also taken from the nodes each workload holds
(_Rules.held_nodes), a small program solved at once, and the better
of the two is reported; and the solver starts from a placement after
that bound (_Rules.nested) where it sends fewer bytes across nodes than
the one packed by zones, so the placement reported is at least that.
"""

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from bench.mixed_program import Program
from bench.peer_cluster import LINK, SAME_NODE, SAME_ZONE, SPREAD, ZONES, Cluster, Graph
from bench.peer_simulation import (
    HOT,
    POD_CPU,
    POD_MEMORY,
    Outcome,
    SimulationOptions,
    draw,
    spread_of,
)
from bench.scheduler_model import MAX_SKEW_HOSTNAME, MAX_SKEW_ZONE
from bench.workload_spread import ZONE_KEEPING_PODS, spreads_of


@dataclass(frozen=True)
class Optimum:
    counts: np.ndarray  # workload x node -> pods, the best placement found
    objective: float  # its bytes/s across zones (or nodes: PreferSameNode)
    bound: float  # no placement under the rules sends fewer
    optimal: bool  # the solver proved it (bound == objective, within its gap)


def free_slots(
    cpu_free: np.ndarray, memory_free: np.ndarray, cpu: float, memory: float
) -> np.ndarray:
    """Per node, how many more pods of ``cpu`` and ``memory`` fit."""
    return np.minimum(np.floor(cpu_free / cpu + 1e-9), np.floor(memory_free / memory + 1e-9))


def fan_in_cap(replicas: int) -> int:
    return max(1, replicas // 2)


def solve(
    graph: Graph,
    background: np.ndarray,
    zone: np.ndarray,
    slots: np.ndarray,
    routing: str,
    seconds: float = 60.0,
    zone_max_skew: int | None = None,
    hostname_max_skew: int | None = None,
) -> Optimum:
    """The placement of every pod of ``graph`` with the fewest bytes across
    zones (across nodes under PreferSameNode), and the solver's bound.

    Across zones, only the zone counts matter: they are chosen first under
    the zone totals of the node rules (a relaxation, so its optimum bounds
    every placement), then spread over the nodes; where they cannot be, the
    whole program is solved with nodes. Across nodes, the whole program is
    solved, started from the best placement across zones."""
    rules = _Rules(graph, background, zone, slots, zone_max_skew, hostname_max_skew)
    if routing == SAME_NODE:
        # Started from the zones best for PreferSameZone, each zone's pods
        # packed onto its first nodes, so that callers sit beside servers.
        # Or, where it sends fewer across nodes, the placement after the
        # held nodes' bound (``nested``).
        zoned = rules.by_zone(SAME_ZONE, seconds).counts
        start = rules.packed(zoned)
        if start is None:
            start = rules.onto_nodes(zoned, seconds)
        least, held = rules.held_nodes(seconds)
        nested = rules.nested(held)
        if nested is not None and (
            start is None or rules.measure(nested, routing) < rules.measure(start, routing)
        ):
            start = nested
        return rules.by_node(routing, seconds, start, least)
    by_zone = rules.by_zone(routing, seconds)
    counts = rules.onto_nodes(by_zone.counts, seconds)
    if counts is not None:
        objective = rules.measure(counts, routing)
        return Optimum(counts, objective, by_zone.bound, by_zone.optimal)
    return rules.by_node(routing, seconds, None)


def held_nodes_bound(
    graph: Graph,
    background: np.ndarray,
    zone: np.ndarray,
    slots: np.ndarray,
    hostname_max_skew: int | None,
    seconds: float = 10.0,
) -> float:
    """The least bytes across nodes any placement sends under PreferSameNode,
    from the nodes each workload holds (_Rules.held_nodes)."""
    rules = _Rules(graph, background, zone, slots, None, hostname_max_skew)
    return rules.held_nodes(seconds)[0]


def nested_placement(
    graph: Graph,
    background: np.ndarray,
    zone: np.ndarray,
    slots: np.ndarray,
    zone_max_skew: int | None,
    hostname_max_skew: int | None,
    seconds: float = 10.0,
) -> np.ndarray | None:
    """The placement after the held nodes' bound (_Rules.nested), or None."""
    rules = _Rules(graph, background, zone, slots, zone_max_skew, hostname_max_skew)
    return rules.nested(rules.held_nodes(seconds)[1])


@dataclass
class _Rules:
    graph: Graph
    background: np.ndarray
    zone: np.ndarray
    slots: np.ndarray
    zone_max_skew: int | None
    hostname_max_skew: int | None

    def per_node(self, w: int) -> int:
        """The most pods of workload ``w`` a node may hold."""
        cap = fan_in_cap(self.graph.replicas[w])
        return cap if self.hostname_max_skew is None else min(cap, self.hostname_max_skew)

    def __post_init__(self) -> None:
        graph = self.graph
        self.workloads = len(graph.names)
        self.halves = np.array([graph.pod_bytes(w) / 2 for w in range(self.workloads)])
        self.room = np.maximum(0.0, HOT * LINK - self.background)
        # A node past HOT already takes no pod, not even one that sends nothing.
        self.slots = np.where(self.room > 0, self.slots, 0)

    def measure(self, counts: np.ndarray, routing: str) -> float:
        """The bytes the objective counts, by the benchmark's own model."""
        cluster = Cluster(
            self.graph, self.background, self.zone, counts.astype(float), routing=routing
        )
        inter, cross = cluster.pair_cut()
        return inter if routing == SAME_NODE else cross

    def by_zone(self, routing: str, seconds: float) -> Optimum:
        """The zone counts with the fewest bytes across zones, under the node
        rules summed per zone."""
        program, graph = Program(), self.graph
        z_counts = self._zone_counts(program)
        for z in range(ZONES):
            here = self.zone == z
            program.row(
                {int(c): 1.0 for c in z_counts[:, z]}, -np.inf, float(self.slots[here].sum())
            )
            program.row(
                {int(c): float(h) for c, h in zip(z_counts[:, z], self.halves, strict=True)},
                -np.inf,
                float(self.room[here].sum()),
            )
            for w in range(self.workloads):
                takes = here & (self.slots >= 1) & (self.room >= self.halves[w])
                program.row(
                    {int(z_counts[w, z]): 1.0},
                    -np.inf,
                    self.per_node(w) * float(takes.sum()),
                )
        offset = self._objective(program, routing, z_counts, lambda w: graph.replicas[w])
        values, _, bound, optimal = program.solve(seconds)
        counts = np.rint(values[z_counts]).astype(int)
        return Optimum(counts, bound + offset, bound + offset, optimal)

    def onto_nodes(self, by_zone: np.ndarray, seconds: float) -> np.ndarray | None:
        """A placement over the nodes with these zone counts, if one meets the rules."""
        program = Program()
        x, z_counts = self._nodes(program)
        for (w, z), count in np.ndenumerate(by_zone):
            program.lower[int(z_counts[w, z])] = program.upper[int(z_counts[w, z])] = float(count)
        try:
            values, _, _, _ = program.solve(seconds)
        except RuntimeError:
            return None
        return np.rint(values[x]).astype(int)

    def packed(self, by_zone: np.ndarray) -> np.ndarray | None:
        """These zone counts put on each zone's roomiest nodes first, every
        workload alike, within the rules; None where they do not fit so."""
        graph, counts = self.graph, np.zeros((self.workloads, len(self.zone)), dtype=int)
        free, room = self.slots.astype(int), self.room.copy()
        for z in range(ZONES):
            nodes = sorted(np.flatnonzero(self.zone == z), key=lambda n: (-free[n], n))
            for w in sorted(range(self.workloads), key=lambda w: -graph.replicas[w]):
                need, cap, half = int(by_zone[w, z]), self.per_node(w), self.halves[w]
                for n in nodes:
                    fits = int(room[n] // half) if half > 0 else need
                    take = min(need, cap, int(free[n]), fits)
                    if take > 0:
                        counts[w, n] += take
                        free[n] -= take
                        room[n] -= take * half
                        need -= take
                if need:
                    return None
        return counts

    def by_node(
        self, routing: str, seconds: float, start: np.ndarray | None, least: float = 0.0
    ) -> Optimum:
        """The whole program, from ``start``; its bound, or ``least`` where
        that is more (a bound worked out otherwise)."""
        program = Program()
        x, _ = self._nodes(program)
        offset = self._objective(program, routing, x, self.per_node)
        values, _, bound, optimal = program.solve(seconds, None if start is None else (x, start))
        counts, bound = np.rint(values[x]).astype(int), bound + offset
        if not optimal:
            bound = max(bound, least)
        return Optimum(counts, self.measure(counts, routing), bound, optimal)

    def nested(self, held: Sequence[int]) -> np.ndarray | None:
        """A placement after the held nodes' bound (``held``: the nodes each
        workload holds at it), where slots and links let it be: the nodes
        in one order (the zones in turn, the roomiest first), each workload
        on the first ``held[w]`` of them that take it, the workloads held
        by fewest first, so that a server held by more nodes runs on every
        node of a caller held by fewer; then its other pods on those nodes,
        the first first. Where no node fills (slots, links), it sends what
        the bound says: a caller's pods beside its server's are those on
        the first nodes of both. None where it breaks a zone rule."""
        graph, zone = self.graph, self.zone
        free, room = self.slots.astype(int), self.room.copy()
        by_zone = [
            sorted(np.flatnonzero((zone == z) & (free >= 1)), key=lambda n: (-free[n], n))
            for z in range(ZONES)
        ]
        order = [int(n) for turn in itertools.zip_longest(*by_zone) for n in turn if n is not None]
        counts = np.zeros((self.workloads, len(zone)), dtype=int)

        def takes(w: int, n: int) -> bool:
            if counts[w, n] >= self.per_node(w) or free[n] < 1 or room[n] < self.halves[w]:
                return False
            counts[w, n] += 1
            free[n] -= 1
            room[n] -= self.halves[w]
            return True

        for w in sorted(range(self.workloads), key=lambda w: held[w]):
            need = graph.replicas[w]
            on = []
            for n in order:
                if len(on) == held[w] or not need:
                    break
                if takes(w, n):
                    on.append(n)
                    need -= 1
            for n in on + order:
                while need and takes(w, n):
                    need -= 1
            if need:
                return None
        return counts if self._keeps_zones(counts) else None

    def _keeps_zones(self, counts: np.ndarray) -> bool:
        """Whether ``counts`` keeps a pod in every zone where the rules ask
        for one, and the zone spread, as the benchmark judges a placement's
        spread (workload_spread.spreads_of)."""
        names = self.graph.names
        spreads = spreads_of(self.zone, dict(zip(names, counts, strict=True)), names)
        most = math.inf if self.zone_max_skew is None else self.zone_max_skew
        return all(
            (s.pods < ZONE_KEEPING_PODS or not s.zones_missing) and s.zone_skew <= most
            for s in spreads
        )

    def held_nodes(self, seconds: float) -> tuple[float, list[int]]:
        """No placement sends fewer bytes across nodes under PreferSameNode
        than the first; the second, the nodes each workload holds at it.

        In any placement, let N_w be the nodes holding a pod of workload w:
        at least replicas / per_node (a node holds at most per_node), at
        least one a zone for a workload that keeps every zone, at most its
        replicas and the nodes that take pods. A caller a's pods beside a
        pod of its server b sit on the nodes holding both, at most
        min(N_a, N_b) of them with per_node(a) each; and at least N_a - N_b
        nodes hold a but not b, each with a pod of a that the server's pods
        cannot serve. So the pods served are at most
        min(r_a, per_node(a) N_a, per_node(a) N_b, r_a - N_a + N_b), and
        the least bytes across nodes over every choice of the N_w bound
        every placement. Slots, links and zone counts are left out, which
        only lowers the bound."""
        program, graph = Program(), self.graph
        usable = int((self.slots >= 1).sum())
        held = []
        for w in range(self.workloads):
            replicas = graph.replicas[w]
            column = program.column(min(replicas, usable))
            least = ZONES if replicas >= ZONE_KEEPING_PODS else 1
            program.lower[column] = max(least, math.ceil(replicas / self.per_node(w)))
            held.append(column)
        for (a, b), rate in graph.pairs.items():
            replicas, most = graph.replicas[a], self.per_node(a)
            served = program.column(replicas, cost=-rate / replicas, integer=False)
            program.row({served: 1.0, held[a]: -float(most)}, -np.inf, 0.0)
            program.row({served: 1.0, held[b]: -float(most)}, -np.inf, 0.0)
            program.row({served: 1.0, held[a]: 1.0, held[b]: -1.0}, -np.inf, replicas)
        values, _, least_served, _ = program.solve(seconds)
        return sum(graph.pairs.values()) + least_served, [round(float(values[c])) for c in held]

    def _zone_counts(self, program: Program) -> np.ndarray:
        """Each workload's pods per zone: all placed, one in every zone for
        a workload of ZONE_KEEPING_PODS or more."""
        graph = self.graph
        z_counts = np.array(
            [
                [program.column(graph.replicas[w]) for _ in range(ZONES)]
                for w in range(self.workloads)
            ]
        )
        for w in range(self.workloads):
            replicas = graph.replicas[w]
            program.row({int(c): 1.0 for c in z_counts[w]}, replicas, replicas)
            low, high = (1 if replicas >= ZONE_KEEPING_PODS else 0), replicas
            skew = self.zone_max_skew
            if skew is not None:
                # max - min <= skew over three zones bounds each one.
                low = max(low, math.ceil((replicas - 2 * skew) / ZONES))
                high = min(high, (replicas + 2 * skew) // ZONES)
                for more, fewer in itertools.permutations(z_counts[w], 2):
                    program.row({int(more): 1.0, int(fewer): -1.0}, -np.inf, skew)
            for c in z_counts[w]:
                program.lower[int(c)], program.upper[int(c)] = low, high
        return z_counts

    def _nodes(self, program: Program) -> tuple[np.ndarray, np.ndarray]:
        """Each workload's pods per node and per zone, under every rule."""
        zone = self.zone
        z_counts = self._zone_counts(program)
        x = np.array(
            [
                [program.column(self.per_node(w)) for _ in range(len(zone))]
                for w in range(self.workloads)
            ]
        )
        for w in range(self.workloads):
            for z in range(ZONES):
                terms = {int(c): 1.0 for c in x[w, zone == z]}
                terms[int(z_counts[w, z])] = -1.0
                program.row(terms, 0.0, 0.0)
        for n in range(len(zone)):
            program.row({int(c): 1.0 for c in x[:, n]}, -np.inf, float(self.slots[n]))
            program.row(
                {int(c): float(h) for c, h in zip(x[:, n], self.halves, strict=True)},
                -np.inf,
                float(self.room[n]),
            )
        return x, z_counts

    def _objective(
        self, program: Program, routing: str, counts: np.ndarray, most: Callable[[int], int]
    ) -> float:
        if routing == SPREAD:
            return _spread_cross_zone(program, self.graph, counts)
        return _unserved(program, self.graph, counts, most)


def _spread_cross_zone(program: Program, graph: Graph, zc: np.ndarray) -> float:
    """Under spread a pair's bytes cross zones but for the share of its pod
    pairs in one zone: rate x (1 - sum_z Za_z Zb_z / (na nb)). Each
    product is written out with one count in unary over its range,
    Za_z = low + sum_k step_k (step_k = [Za_z >= low + k]), so
    Za_z Zb_z = low Zb_z + sum_k t_k; maximising, t_k <= Zb_z and
    t_k <= high(Zb_z) step_k make t_k = step_k Zb_z exactly. The side with
    the narrower range goes in unary (a zone spread limit narrows it).
    Returns the constant part."""
    offset = 0.0
    steps: dict[int, list[int]] = {}

    def width(column: int) -> float:
        return program.upper[column] - program.lower[column]

    for (a, b), rate in graph.pairs.items():
        per = rate / (graph.replicas[a] * graph.replicas[b])
        offset += rate
        for z in range(ZONES):
            unary, other = int(zc[a, z]), int(zc[b, z])
            if width(unary) > width(other):
                unary, other = other, unary
            if unary not in steps:
                steps[unary] = _unary(program, unary)
            program.cost[other] -= per * program.lower[unary]
            for step in steps[unary]:
                t = program.column(program.upper[other], cost=-per, integer=False)
                program.row({t: 1.0, other: -1.0}, -np.inf, 0.0)
                program.row({t: 1.0, step: -program.upper[other]}, -np.inf, 0.0)
    return offset


def _unary(program: Program, count: int) -> list[int]:
    """Binary steps s_1 >= s_2 >= ... with low + sum s_k = ``count``, over
    the column's bounds."""
    low, high = program.lower[count], program.upper[count]
    steps = [program.column(1.0) for _ in range(round(high - low))]
    program.row({count: 1.0, **{s: -1.0 for s in steps}}, low, low)
    for first, second in itertools.pairwise(steps):
        program.row({first: 1.0, second: -1.0}, 0.0, np.inf)
    return steps


def _unserved(
    program: Program, graph: Graph, counts: np.ndarray, most: Callable[[int], int]
) -> float:
    """Under topology routing a client's bytes leave its node (zone) when
    its node (zone) has no server pod, and stay otherwise: per place p,
    served_p in {0, 1} with served_p <= servers_p <= most x served_p, and
    the clients' unserved pods u_p >= clients_p - most_a x served_p."""
    served: dict[tuple[int, int], int] = {}
    for (a, b), rate in graph.pairs.items():
        per_client = rate / graph.replicas[a]
        for p in range(counts.shape[1]):
            if (b, p) not in served:
                s = served[b, p] = program.column(1.0)
                program.row({s: 1.0, int(counts[b, p]): -1.0}, -np.inf, 0.0)
                program.row({int(counts[b, p]): 1.0, s: -float(most(b))}, -np.inf, 0.0)
            u = program.column(most(a), cost=per_client, integer=False)
            program.row(
                {u: 1.0, int(counts[a, p]): -1.0, served[b, p]: float(most(a))}, 0.0, np.inf
            )
    return 0.0


def optimum_outcome(
    nodes: int, replica_factor: int, seed: int, options: SimulationOptions, seconds: float
) -> tuple[Outcome, Optimum]:
    """The optimum of draw ``seed`` under the variant's routing and zone
    spread, measured as the simulated placements are."""
    routing = options.routing
    zone_max_skew = options.zone_max_skew or (MAX_SKEW_ZONE if options.zone_spread else None)
    _, background, state, graph = draw(nodes, replica_factor, seed)
    slots = free_slots(
        state.cpu_allocatable - state.cpu_requested,
        state.memory_allocatable - state.memory_requested,
        POD_CPU,
        POD_MEMORY,
    )
    # Every variant's pods carry a hostname constraint (the default's, or their own).
    best = solve(
        graph, background, state.zone, slots, routing, seconds, zone_max_skew, MAX_SKEW_HOSTNAME
    )
    cluster = Cluster(graph, background, state.zone, best.counts.astype(float), routing=routing)
    inter, cross = cluster.pair_cut()
    utilisation = cluster.link_load() / LINK
    outcome = Outcome(
        inter,
        cross,
        float(utilisation.max()),
        placed=int(best.counts.sum()),
        hot=int(best.counts[:, utilisation > HOT].sum()),
        **spread_of(state.zone, best.counts, graph.names),
    )
    return outcome, best
