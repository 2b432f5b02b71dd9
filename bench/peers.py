"""Steering by peers, simulated: a service graph's pods rolled out over three
zones, placed by kube-scheduler alone and by kubectl-nettraffic without and
with its peers, each judged against the optimum an exact solver finds for
the same draw under the same rules (bench/peer_optimum.py). Inter-node and
cross-zone bytes, their cost, hot placements, the busiest link and each
workload's zones. Each run draws anew (the graph, the cluster, the rollout
order, the scheduler's ties) unless --seed is given; the tables give the
median and the worst draw.

Goals per draw (issue 74): (c)'s cross-zone bytes never above
kube-scheduler alone's, (b)'s not beyond kube-scheduler's own noise (other
ties); no workload of 3 pods or more missing a zone that
kube-scheduler alone keeps; at most 0.5% of (c)'s placements hot and its
busiest link within 2 points of (b)'s. In the median draw, (c) closes at
least half of the gap from kube-scheduler alone to the optimum: in
cross-zone bytes where Services spread, in inter-node bytes under
PreferSameNode.
"""

import argparse
import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bench.peer_cluster import ROUTINGS, SAME_NODE, SAME_ZONE, SPREAD
from bench.peer_optimum import Optimum, optimum_outcome
from bench.peer_simulation import (
    BUSY,
    HOT,
    PRICE,
    ROUNDS,
    STRATEGIES,
    Outcome,
    SimulationOptions,
    simulate,
)
from bench.report import bench_parser, drawn_seed, rerun_command, write_section
from kubectl_nettraffic.config import PeerSettings
from kubectl_nettraffic.measuring.scoreview import cross_zone_cost

DEFAULT_PULL = PeerSettings().pull_points
SCALES = (("50 nodes", 50, 1), ("500 nodes", 500, 4))
# The bytes the optimum minimises and the gap is taken in, per routing;
# the routings whose gap is judged (half of it closed in the median draw).
GAP_MEASURE = {SPREAD: "cross-zone", SAME_ZONE: "cross-zone", SAME_NODE: "inter-node"}
GAP_JUDGED = (SPREAD, SAME_NODE)
_PER_DRAW = """\
A draw meets the per-draw goals when (c) sends no more bytes across zones
than (a) and (b) no more than the noise above (a) (the most (a') is off
(a) over the draws: (b) knows no peers, and where its choices differ from
kube-scheduler's the bytes move as (a)'s own ties move them), neither leaves a workload of 3 pods or more without
a zone (a) gives it a pod in, at most 0.5% of (c)'s placements are hot and
its busiest link is within 2 points of (b)'s."""
GOALS_NOTE = {
    routing: f"{_PER_DRAW} The goals are met when every draw meets them"
    + (
        f" and, in the median draw, (c) closes at least half of the gap from (a) to (d) in {measure} bytes."
        if routing in GAP_JUDGED
        else f" (the gap share, in {measure} bytes, is shown, not judged)."
    )
    for routing, measure in GAP_MEASURE.items()
}
LABELS = {
    "default": "(a) kube-scheduler alone",
    "other-ties": "(a') kube-scheduler alone, other ties",
    "nettraffic": "(b) nettraffic, no flow source",
    "peers": "(c) nettraffic with peers (Istio)",
    "optimum": "(d) optimum (exact solver)",
}
MODEL_NOTE = f"""\
The model, drawn anew for each draw: 40 workloads (6 front ends, 18
services, 10 stores, 6 shared services; chains, fan-out from the first front
end, fan-in to the shared services), each pair's bytes/s log-normal (median
2 MB/s, sigma 1), replicas 1-12 per workload (times four at 500 nodes),
nodes on 10 Gbit/s links in three zones with background load as in
bench.placement (5% of nodes at 75-95%). A Service spreads connections
evenly over its endpoints (kube-proxy's iptables rules give endpoint i of n
the probability 1/(n-i): kubernetes/kubernetes
pkg/proxy/iptables/proxier.go, syncProxyRules), so a pair's bytes split
evenly over the pairs of their pods; bytes between two pods on one node
touch no link. The running cluster was placed by kube-scheduler alone;
then every workload is rolled out {ROUNDS} times, each time in a drawn
order, its pods replaced one at a time, two seconds apart. kube-scheduler is
bench/scheduler_model.py (its default profile, with the system default
topology spread constraints, which count a rollout's new ReplicaSet
apart: helper/spread.go, DefaultSelector); (b) and (c) are the real Steerer, learner
(the flow series matched by the product's peers_from) and traffic-tier
labels with their defaults. (d) is the optimum: every pod placed at once
by an exact solver (HiGHS) under the rules the others meet or are judged
by: pods fit, no link past 80% (each pod's bytes counted as if none stayed
on its node), at most half of a workload's pods on a node and no more than
the hostname spread's maxSkew (3, the default constraint's or the pods'
own, which the product keeps), a pod in every
zone for a workload of 3 pods or more, and the pods' zone spread (maxSkew 5,
the default constraint, which the product keeps; none when the pods spread
per hostname only); it minimises the bytes across
zones (across nodes under PreferSameNode). Where the solver runs out of
time, (d) is the best placement it found and the gap is taken to its bound
(the least any placement could send; under PreferSameNode the better of the
solver's and one from the number of nodes each workload holds,
bench/peer_optimum.py held_nodes; there the solver starts from a placement
that holds those nodes, each server on every node of its callers where the
nodes' slots and links allow, nested), said beside the verdicts. Limits:
metrics are read as instant rates (no 2 m window), the learner's places
and pairs are 30 s old at most, no pod fails or restarts; the optimum
places the pods once, the others roll them out {ROUNDS} times."""

MOVED_NOTE = f"""\
The last two columns compare each steered pod's node with the node the
scheduler model would have bound it to at that moment without our terms
(the same sample and tie draw): the pods moved where kube-scheduler's own
pick would have been calm (its link at most {BUSY:.0%} full with the pod,
`steering.busyAbove`: the product sees nothing to save there), and where it
would have been busy but not hot. Pods kept off a node come back as its
pick: it has the fewest requests."""

ROUTED_NOTE = """\
Here every Service carries `trafficDistribution: {routing}`, and a client's
connections go as kube-proxy sends them (kubernetes/kubernetes
pkg/proxy/topology.go, topologyModeFromHints, with the hints the
EndpointSlice controller writes, staging/src/k8s.io/endpointslice/trafficdist):
to the server pods on the client's node when there are any (PreferSameNode
only), else to those in its zone when there are any, else evenly to all. A
pair's ends are a caller and the workload it calls. The product reads
each Service's routing (`peers.routing: services`, its default) and counts
a pair's bytes as the Service sends them."""

ZONE_CONSTRAINT_NOTE = """\
Here every pod carries two topology spread constraints: per zone, maxSkew
1, `whenUnsatisfiable: DoNotSchedule` (a filter: podtopologyspread
filtering.go, Filter), and per hostname, maxSkew 3, ScheduleAnyway (scored;
the system defaults then do not apply). The webhook reads the same
constraints on each pod it admits."""

HOSTNAME_SPREAD_NOTE = """\
Here every pod carries a topology spread constraint per hostname alone
(maxSkew 3, ScheduleAnyway), so kube-scheduler's default one per zone does
not apply (podtopologyspread, getConstraints: the defaults only for a pod
with none). The webhook reads the same constraints on each pod it admits."""


@dataclass
class Draws:
    """Each placement's outcome per draw, and the optimum's."""

    runs: dict[str, list[Outcome]]
    optima: list[Optimum]
    routing: str

    @property
    def measure(self) -> str:
        """The bytes the optimum minimises and the gap is taken in."""
        return GAP_MEASURE[self.routing].replace("-", "_")


def run_draws(
    nodes: int,
    factor: int,
    seeds: Sequence[int],
    options: SimulationOptions,
    solver_seconds: float,
) -> Draws:
    runs = {s: [simulate(nodes, factor, s, seed, options) for seed in seeds] for s in STRATEGIES}
    other_ties = replace(options, ties=2)
    runs["other-ties"] = [simulate(nodes, factor, "default", seed, other_ties) for seed in seeds]
    best = [optimum_outcome(nodes, factor, seed, options, solver_seconds) for seed in seeds]
    runs["optimum"] = [outcome for outcome, _ in best]
    return Draws(runs, [optimum for _, optimum in best], options.routing)


def draw_verdicts(draws: Draws) -> list[dict[str, float | bool]]:
    runs, verdicts = draws.runs, []
    # How far kube-scheduler alone moves with other ties: (b), which knows
    # no peers, may move as far.
    noise = max(
        _off(o.cross_zone, d.cross_zone)
        for o, d in zip(runs["other-ties"], runs["default"], strict=True)
    )
    for default, alone, ours, optimum in zip(
        runs["default"], runs["nettraffic"], runs["peers"], draws.optima, strict=True
    ):
        target = optimum.objective if optimum.optimal else optimum.bound
        gap = getattr(default, draws.measure) - target
        closed = getattr(default, draws.measure) - getattr(ours, draws.measure)
        verdict: dict[str, float | bool] = {
            "cross_b": bytes_ratio(alone.cross_zone, default.cross_zone),
            "cross_c": bytes_ratio(ours.cross_zone, default.cross_zone),
            "gap": closed / gap if gap > 0 else (1.0 if closed >= 0 else -math.inf),
            "lost_b": zones_lost(alone, default),
            "lost_c": zones_lost(ours, default),
            "hot": ours.hot / max(1, ours.placed),
            "busiest": ours.busiest - alone.busiest,
            "proven": optimum.optimal,
        }
        verdict["noise"] = noise
        verdict["met"] = not missed_goals(verdict)
        verdicts.append(verdict)
    return verdicts


def missed_goals(verdict: dict[str, float | bool]) -> list[str]:
    """The per-draw goals a draw's ``verdict`` misses (_PER_DRAW), by name."""
    goals = {
        "(b) past kube-scheduler's tie noise": verdict["cross_b"] <= 1.0 + verdict["noise"],
        "(c) above kube-scheduler's cross-zone bytes": verdict["cross_c"] <= 1.0,
        "(b) lost a zone": verdict["lost_b"] == 0,
        "(c) lost a zone": verdict["lost_c"] == 0,
        "(c) placed hot": verdict["hot"] <= 0.005,
        "(c) busiest link past (b)'s": verdict["busiest"] <= 0.02,
    }
    return [goal for goal, kept in goals.items() if not kept]


def zones_lost(ours: Outcome, default: Outcome) -> int:
    """Workloads of 3 pods or more missing more zones than under kube-scheduler alone."""
    return sum(
        missing > default.zones_missing.get(workload, 0)
        for workload, missing in ours.zones_missing.items()
    )


def _off(other: float, default: float) -> float:
    """How far ``other`` is from ``default``, as a share of it (none from none: 0)."""
    if default > 0:
        return abs(other / default - 1)
    return math.inf if other > 0 else 0.0


def bytes_ratio(ours: float, default: float) -> float:
    """``ours`` / ``default``; where the default sends no bytes (Services
    that keep every client on its zone), none is 0 and any is infinite."""
    if default > 0:
        return ours / default
    return math.inf if ours > 0 else 0.0


def _moved(strategy: str, moved: Sequence[int], outcomes: Sequence[Outcome]) -> str:
    """The share of a placement's pods ``moved`` off kube-scheduler's own
    pick; kube-scheduler's own none, the optimum's not counted (it places
    every pod at once)."""
    if strategy == "optimum":
        return "-"
    return _median_worst([100 * m / max(1, o.placed) for m, o in zip(moved, outcomes, strict=True)])


def _median_worst(values: Sequence[float], worst_is_max: bool = True) -> str:
    worst = max(values) if worst_is_max else min(values)
    return f"{statistics.median(values):.3g} / {worst:.3g}"


def tables(name: str, draws: Draws) -> tuple[list[str], str]:
    rows = []
    for strategy in LABELS:
        outcomes = draws.runs[strategy]
        rows.append(
            f"| {name} | {LABELS[strategy]} | "
            f"{_median_worst([o.inter_node / 1e6 for o in outcomes])} | "
            f"{_median_worst([o.cross_zone / 1e6 for o in outcomes])} | "
            f"{_median_worst([cross_zone_cost(o.cross_zone, PRICE) for o in outcomes])} | "
            f"{_median_worst([100 * o.hot / max(1, o.placed) for o in outcomes])} | "
            f"{_median_worst([100 * o.busiest for o in outcomes])} | "
            f"{_median_worst([100 * o.spread.lost_zone for o in outcomes])} | "
            f"{_median_worst([o.spread.zone_skew for o in outcomes])} | "
            f"{_moved(strategy, [o.moved_calm for o in outcomes], outcomes)} | "
            f"{_moved(strategy, [o.moved_busy for o in outcomes], outcomes)} |"
        )
    verdicts = draw_verdicts(draws)
    met = sum(bool(v["met"]) for v in verdicts)
    gap = statistics.median(float(v["gap"]) for v in verdicts)
    proven = sum(bool(v["proven"]) for v in verdicts)
    goals_met = met == len(verdicts) and (gap >= 0.5 or draws.routing not in GAP_JUDGED)

    def column(key: str, scale: float = 1.0) -> str:
        return _median_worst([scale * float(v[key]) for v in verdicts])

    verdict = (
        f"| {name} | {100 * float(verdicts[0]['noise']):.2g} | "
        f"{column('cross_b')} | {column('cross_c')} | "
        f"{_median_worst([float(v['gap']) for v in verdicts], worst_is_max=False)} | "
        f"{column('lost_b')} | {column('lost_c')} | {column('hot', 100)} | "
        f"{column('busiest', 100)} | {met} of {len(verdicts)} | "
        f"{proven} of {len(verdicts)} | {'yes' if goals_met else 'no'} |"
    )
    return rows, verdict


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model's variants on the command line (SimulationOptions):
    spread, routing and peers.pullPoints."""
    spread = parser.add_mutually_exclusive_group()
    spread.add_argument(
        "--hostname-spread-only",
        action="store_true",
        help="every pod carries a topology spread constraint per hostname alone, so the"
        " default one per zone does not apply",
    )
    spread.add_argument(
        "--zone-constraint",
        action="store_true",
        help="every pod carries a zone topology spread constraint, maxSkew 1, DoNotSchedule,"
        " and a hostname one, ScheduleAnyway",
    )
    parser.add_argument(
        "--traffic-distribution",
        choices=ROUTINGS,
        default=SPREAD,
        help="every Service's trafficDistribution: spread (none set: connections spread over"
        " every endpoint, the default), PreferSameZone or PreferSameNode (kube-proxy keeps a"
        " client on its zone's or node's endpoints when there are any)",
    )
    parser.add_argument(
        "--pull-points",
        type=float,
        help=f"peers.pullPoints for (c) (default: the product's default, {DEFAULT_PULL:g})",
    )


def simulation_options(args: argparse.Namespace) -> SimulationOptions:
    """The variant of the model that add_model_arguments' flags ask for."""
    return SimulationOptions(
        zone_spread=not args.hostname_spread_only,
        routing=args.traffic_distribution,
        zone_max_skew=1 if args.zone_constraint else None,
        pull_points=args.pull_points,
    )


def variant(args: argparse.Namespace) -> tuple[str, str, str]:
    """The docs section, title and notes of the run's variant of the model."""
    section, title, notes = "peers", "Steering by peers (simulation)", [MODEL_NOTE]
    routing = args.traffic_distribution
    if routing != SPREAD:
        section, title = f"{section}-{routing}", f"{title}, Services with {routing}"
        notes.append(ROUTED_NOTE.format(routing=routing))
    if args.zone_constraint:
        section, title = f"{section}-zone-constraint", f"{title}, pods spread over zones"
        notes.append(ZONE_CONSTRAINT_NOTE)
    if args.hostname_spread_only:
        section, title = f"{section}-hostname-spread", f"{title}, pods spread per hostname only"
        notes.append(HOSTNAME_SPREAD_NOTE)
    if args.pull_points is not None:
        points = f"{args.pull_points:g}"
        section, title = f"{section}-pull-{points}", f"{title}, peers.pullPoints {points}"
        notes.append(f"Here (c) runs with `peers.pullPoints` {points} (default {DEFAULT_PULL:g}).")
    return section, title, "\n\n".join(notes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--draws", type=int, default=5, help="draws per scale (default 5)")
    parser.add_argument("--seed", type=int, help="the first draw's seed (default: drawn)")
    add_model_arguments(parser)
    parser.add_argument(
        "--solver-seconds",
        type=float,
        default=60.0,
        help="the exact solver's time per optimum (default 60); past it, its bound is the yardstick",
    )
    args = parser.parse_args(argv)
    options = simulation_options(args)
    first = drawn_seed(args.seed)
    seeds = [first + i for i in range(args.draws)]
    started = time.time()
    rows, verdicts = [], []
    for name, nodes, factor in SCALES:
        draws = run_draws(nodes, factor, seeds, options, args.solver_seconds)
        for seed, draw_verdict in zip(seeds, draw_verdicts(draws), strict=True):
            missed = ", ".join(missed_goals(draw_verdict)) or "none"
            print(f"{name}, seed {seed}: per-draw goals missed: {missed}")
        table_rows, verdict = tables(name, draws)
        rows += table_rows
        verdicts.append(verdict)
    elapsed = time.time() - started
    table = "\n".join(
        [
            "| scale | placement | inter-node MB/s | cross-zone MB/s | cross-zone $/month | placed hot % | busiest link % | workloads of 3+ pods missing a zone % | zone skew, mean | pods bound off kube-scheduler's own pick, calm there % | ... busy there, not hot % |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    verdict = "\n".join(
        [
            f"| scale | (a') cross-zone off (a)'s, most %, the noise | (b) cross-zone / (a) | (c) cross-zone / (a) | (c) share of the gap from (a) to (d), {GAP_MEASURE[options.routing]} | (b) workloads losing a zone (a) keeps | (c) workloads losing a zone (a) keeps | (c) placed hot % | (c) busiest link minus (b), points | draws meeting every per-draw goal | optimum proven | goals met |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            *verdicts,
        ]
    )
    print(table)
    print()
    print(verdict)
    print(f"\nseeds {seeds[0]}..{seeds[-1]}, {elapsed:.0f}s")
    if not args.no_write:
        section, title, notes = variant(args)
        write_section(
            section,
            title,
            rerun_command("bench.peers", argv, args.seed, first),
            f"{notes}\n\nEach figure is the median / the worst of {len(seeds)} draws "
            f"(seeds {seeds[0]}..{seeds[-1]}). Cross-zone bytes are "
            f"priced at ${PRICE}/GB each way. A placement is hot when its node's link is above "
            f"{HOT:.0%} once the pod is on it. {MOVED_NOTE}\n\n{table}\n\n"
            f"Against the goals, draw by draw (the gap share's worst is its least):\n\n"
            f"{GOALS_NOTE[options.routing]}\n\n"
            f"{verdict}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
