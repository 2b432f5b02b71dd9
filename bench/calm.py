"""Do no harm: each workload's spread, in a calm cluster and under load,
against kube-scheduler alone on the same draws.

The placement simulation of bench.placement (the real Steerer, bookings,
binding watch and learner; kube-scheduler as bench/scheduler_model.py
models it, its default topology spread included), a few rows of it with
more draws each. Run:

    python -m bench.calm               # writes its section of docs/benchmarks.md
    python -m bench.calm --seed N      # the draws from N (default: drawn anew)

Goals, per draw (bench/workload_spread.py): in a calm cluster the mean zone
skew and the mean of a workload's most pods on one node within 0.5 of
kube-scheduler alone's; in every row no more workloads past zone skew 5,
and no more workloads of 3 pods or more missing a zone, than under
kube-scheduler alone; under load, the busiest link within 2 points of the
oracle's (which keeps the zone spread) and at most 0.5% of pods placed hot
(or the oracle's share + 0.2 points).
"""

import multiprocessing
import statistics
import time

from bench.placement_scenarios import Scenario, calm_scenario
from bench.placement_summary import Summary, summarise
from bench.placement_tables import meets_goals
from bench.report import bench_parser, drawn_seed, rerun_command, write_section
from bench.workload_spread import SpreadSummary, spread_kept

STRATEGIES = {
    "default": "kube-scheduler alone",
    "tiers": "kubectl-nettraffic (defaults)",
    "oracle": "oracle (keeps the zone spread)",
}


def rows(draws: int) -> list[tuple[Scenario, int]]:
    """The rows and the draws each runs."""
    return [
        (calm_scenario(50, 12), draws),
        (calm_scenario(500, 40), max(2, draws // 4)),
        (Scenario("50 nodes, 10% hot", 50, 12), draws),
        (Scenario("50 nodes, 10% hot, workloads of 3-12 pods", 50, 12, burst_sizes=(3, 12)), draws),
        (Scenario("500 nodes, 10% hot", 500, 40), max(2, draws // 4)),
    ]


def judged(scenario: Scenario, results: dict[str, Summary]) -> tuple[list[str], int, int]:
    """The table's lines for one row, and (draws meeting every goal, draws)."""
    alone, ours, oracle = results["default"], results["tiers"], results["oracle"]
    calm = scenario.calm is not None
    met = 0
    per_draw = zip(
        ours.seed_spreads,
        alone.seed_spreads,
        ours.seed_maxima,
        oracle.seed_maxima,
        ours.seed_hot,
        oracle.seed_hot,
        strict=True,
    )
    for spread, alone_spread, busiest, oracle_busiest, hot, oracle_hot in per_draw:
        load = calm or meets_goals(
            hot[0] / max(1, hot[1]), busiest - oracle_busiest, oracle_hot[0] / max(1, oracle_hot[1])
        )
        met += spread_kept(spread, alone_spread, calm) and load
    lines = []
    for strategy, label in STRATEGIES.items():
        summary = results[strategy]
        mean = SpreadSummary.mean(summary.seed_spreads)
        worst_skew = max(s.zone_skew for s in summary.seed_spreads)
        verdict = f"{met} of {len(ours.seed_spreads)}" if strategy == "tiers" else "-"
        lines.append(
            f"| {scenario.name} | {label} | {mean.zone_skew:.2f} / {worst_skew:.2f} | "
            f"{mean.past_skew:.0%} | {mean.most_on_node:.2f} | {mean.lost_zone:.0%} | "
            f"{statistics.median(summary.seed_maxima):.1%} / {max(summary.seed_maxima):.1%} | "
            f"{summary.hot_share:.2%} | {verdict} |"
        )
    return lines, met, len(ours.seed_spreads)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--seed", type=int, help="the first draw's seed (default: drawn anew)")
    parser.add_argument("--draws", type=int, default=8, help="draws of each 50-node row")
    args = parser.parse_args(argv)
    first = drawn_seed(args.seed)
    started = time.time()
    lines = [
        "| scenario | placement | zone skew, mean / worst draw | workloads past zone skew 5 | most pods of a workload on one node | workloads of 3+ pods missing a zone | busiest link, median / worst draw | pods placed hot | draws meeting every goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = []
    with multiprocessing.Pool() as pool:
        for scenario, draws in rows(args.draws):
            seeds = list(range(first, first + draws))
            results = {s: summarise(scenario, s, seeds, pool.imap)[0] for s in STRATEGIES}
            table, met, total = judged(scenario, results)
            lines += table
            verdicts.append(f"{scenario.name}: {met} of {total} draws meet every goal")
    text = "\n".join(lines)
    print(text)
    print()
    print("\n".join(verdicts))
    print(f"\nseeds from {first}, {time.time() - started:.0f}s")
    if not args.no_write:
        write_section(
            "calm",
            "Do no harm: the workload's spread, calm and under load",
            rerun_command("bench.calm", argv, args.seed, first),
            "The placement simulation of bench.placement (the real Steerer, bookings and "
            "binding watch; kube-scheduler as bench/scheduler_model.py models it, with its "
            "default topology spread), each draw a cluster, bursts and ties of its own. "
            "Figures per workload at the end of a draw, as its topology spread sees it; a "
            "draw meets every goal when its spread is kept against kube-scheduler alone on "
            "the same draw (calm: mean zone skew and most pods per node within 0.5; always: "
            "no more workloads past zone skew 5 nor missing a zone) and, under load, its "
            "busiest link is within 2 points of the oracle's with at most 0.5% of pods hot "
            "(bench/workload_spread.py, bench/placement.py meets_goals). Limits: the model "
            "counts a workload's pods for its spread as kube-scheduler's default "
            "constraints do (every node has a zone); the webhook counts those booked since "
            "the last measurements.\n\n" + text + "\n\n" + "\n".join(f"- {v}" for v in verdicts),
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
