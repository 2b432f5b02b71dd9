"""bench.placement's tables: each scenario's rows as its strategies run,
judged against the goals, and the tables they make."""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from bench.placement_scenarios import (
    GOAL_DELAY,
    MEAN_ORACLE_ROW,
    SHOWN_AT_ADMISSION,
    Scenario,
    delay_label,
)
from bench.placement_simulation import ORACLE_MEAN, STEERED, STRATEGIES
from bench.placement_summary import SeedMapper, Summary, summarise
from bench.workload_spread import SpreadSummary, spread_kept

LABELS = {
    "default": "(a) default scheduler",
    "tutorial": "(b) tutorial: lowest node, no accounting",
    "nettraffic": "(c) kubectl-nettraffic, trafficTiers off",
    "tiers": "(e) kubectl-nettraffic defaults (trafficTiers on)",
    "oracle": "(d) oracle",
}


def meets_goals(hot: float, gap: float, oracle_hot: float) -> bool:
    """A row's goals, from its figures alone: at most 0.5% of pods placed hot
    or the oracle's share + 0.2 points, whichever is larger, and the busiest
    link within 2 points of the oracle's."""
    return hot <= max(0.005, oracle_hot + 0.002) and gap <= 0.02


@dataclass(frozen=True)
class HeavyRow:
    """(e)'s figures in one row of the tables of heavy pods."""

    base: str  # the scenario's name without its replica count
    replicas: int
    binding_delay: float  # seconds; 0: at once
    hot: float
    first_burst_hot: float | None
    gap: float  # max utilisation minus the oracle's
    oracle_hot: float
    watch_delay: float | None  # the steering replicas' measured watch delay
    hot_error: float  # standard errors over the seeds
    gap_error: float

    def meets(self) -> bool:
        return meets_goals(self.hot, self.gap, self.oracle_hot)


def heavy_row(scenario: Scenario, ours: Summary, oracle: Summary) -> HeavyRow:
    return HeavyRow(
        scenario.heavy,
        scenario.replicas,
        scenario.binding_delay,
        ours.hot_share,
        ours.first_burst_hot_share,
        ours.max_utilisation - oracle.max_utilisation,
        oracle.hot_share,
        ours.watch_delay,
        hot_share_error(ours.seed_hot),
        paired_error(ours.seed_maxima, oracle.seed_maxima),
    )


def paired_error(ours: Sequence[float], oracle: Sequence[float]) -> float:
    """The standard error of the mean of ``ours`` less ``oracle``, seed by
    seed (both run on the same seeds, in order)."""
    differences = [a - b for a, b in zip(ours, oracle, strict=True)]
    if len(differences) < 2:
        return math.nan
    return statistics.stdev(differences) / math.sqrt(len(differences))


def hot_share_error(seeds: Sequence[tuple[int, int]]) -> float:
    """The standard error of the share of pods placed hot, a ratio over
    seeds of (pods placed hot, pods placed): the seeds are the samples,
    not the pods, whose placements within a seed depend on each other."""
    n = len(seeds)
    placed = sum(pods for _, pods in seeds)
    if n < 2 or not placed:
        return math.nan
    share = sum(hot for hot, _ in seeds) / placed
    residuals = sum((hot - share * pods) ** 2 for hot, pods in seeds) / (n - 1)
    return math.sqrt(residuals / n) / (placed / n)


def heavy_table_rows(rows: list[HeavyRow], goal_up_to: float) -> list[str]:
    """One line per row; rows whose binding delay is over ``goal_up_to``
    are reported against no goal."""
    lines = []
    for row in rows:
        first = "-" if row.first_burst_hot is None else f"{row.first_burst_hot:.2%}"
        delay = "-" if row.watch_delay is None else f"{row.watch_delay * 1000:.0f} ms"
        verdict = "yes" if row.meets() else "no"
        if row.binding_delay > goal_up_to:
            verdict = f"no goal ({verdict})"
        lines.append(
            # The oracle's to three places: at 300 seeds one hot pod in them is 0.001%.
            f"| {row.base} | {row.replicas} | {delay_label(row.binding_delay)} | {delay} | "
            f"{row.hot:.2%} ± {row.hot_error * 100:.2f} | {first} | {row.oracle_hot:.3%} | "
            f"{row.gap:+.1%} ± {row.gap_error * 100:.1f} | {verdict} |"
        )
    return lines


def spread_rows(scenario: Scenario, results: dict[str, Summary], seeds: int) -> list[str]:
    """Each strategy's workloads' spread in one scenario, and for the
    steered ones the draws whose spread is kept against (a)'s
    (bench/workload_spread.py: in a calm cluster zone skew and pods per
    node within 0.5 of (a)'s; always no more workloads past zone skew 5 nor
    missing a zone)."""
    alone = results["default"].seed_spreads
    rows = []
    for strategy in STRATEGIES:
        draws = results[strategy].seed_spreads
        mean = SpreadSummary.mean(draws)
        kept = "-"
        if strategy in STEERED:
            calm = scenario.calm is not None
            met = sum(spread_kept(o, a, calm) for o, a in zip(draws, alone, strict=True))
            kept = f"{met} of {len(draws)}"
        rows.append(
            f"| {scenario.name} ({seeds} seeds) | {LABELS[strategy]} | {mean.zone_skew:.1f} | "
            f"{mean.past_skew:.0%} | {mean.most_on_node:.1f} | {mean.lost_zone:.0%} | {kept} |"
        )
    return rows


def share(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}%}"


@dataclass
class Rows:
    """Every table's rows, as the scenarios run."""

    main: list[str] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    spread: list[str] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    learning: list[str] = field(default_factory=list)
    heavy: list[HeavyRow] = field(default_factory=list)
    plots: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    # The oracle of each heavy row at once, for its rows with replicas and
    # delays: it places the same pods the same way (it follows no binding).
    oracles: dict[Scenario, Summary] = field(default_factory=dict)


def run_scenario(scenario: Scenario, seeds: Sequence[int], rows: Rows, mapper: SeedMapper) -> None:
    """One scenario's strategies, its rows added to ``rows``."""
    # The oracle places alike whatever the replicas, the delay and what the
    # replicas see: one run serves every such twin.
    same_oracle = replace(
        scenario,
        name="",
        replicas=1,
        binding_delay=0.0,
        shown_at_admission=False,
        heavy=scenario.heavy.removesuffix(SHOWN_AT_ADMISSION),
    )
    if scenario.heavy and same_oracle in rows.oracles:
        summary = summarise(scenario, "tiers", list(seeds), mapper)[0]
        rows.heavy.append(heavy_row(scenario, summary, rows.oracles[same_oracle]))
        return
    results = {}
    for strategy in STRATEGIES:
        summary, last = summarise(scenario, strategy, list(seeds), mapper)
        results[strategy] = summary
        rows.plots.setdefault(scenario.name, {})[strategy] = last
        rows.main.append(
            f"| {scenario.name} ({len(seeds)} seeds) | {LABELS[strategy]} | {summary.max_utilisation:.1%} | "
            f"{summary.hot_share:.2%} | {summary.pending_share:.1%} | {summary.std_utilisation:.3f} | "
            f"{summary.burst_max_share:.0%} | {share(summary.first_preference_share)} | "
            f"{share(summary.preferred_scored_share)} | {share(summary.on_preferred_share)} |"
        )
    rows.spread += spread_rows(scenario, results, len(seeds))
    oracle = rows.oracles[same_oracle] = results["oracle"]
    if scenario.name == MEAN_ORACLE_ROW:
        knowing_mean = summarise(scenario, ORACLE_MEAN, list(seeds), mapper)[0]
        ours = results["tiers"]
        rows.limits.append(
            f"| {scenario.name} ({len(seeds)} seeds) | {ours.hot_share:.2%} | "
            f"{oracle.hot_share:.3%} | {knowing_mean.hot_share:.3%} | "
            f"{ours.max_utilisation - oracle.max_utilisation:+.1%} | "
            f"{ours.max_utilisation - knowing_mean.max_utilisation:+.1%} |"
        )
    rows.verdicts.append(verdict_row(scenario, results))
    if scenario.workloads is not None:
        rows.learning.append(learning_row(scenario, results))
    if scenario.heavy:
        rows.heavy.append(heavy_row(scenario, results["tiers"], oracle))


def verdict_row(scenario: Scenario, results: dict[str, Summary]) -> str:
    """Each steered strategy against the goals, beside the oracle."""
    oracle, tutorial = results["oracle"], results["tutorial"]
    row = [scenario.name]
    for strategy in STEERED:
        ours = results[strategy]
        ratio = tutorial.hot_share / ours.hot_share if ours.hot_share else math.inf
        gap = ours.max_utilisation - oracle.max_utilisation
        met = meets_goals(ours.hot_share, gap, oracle.hot_share) and ratio >= 5
        verdict = "yes" if met else "no"
        row += [
            f"{gap:+.1%}",
            f"{ours.hot_share:.2%}",
            f"{'∞' if ratio == math.inf else f'{ratio:.1f}x'}",
            verdict,
        ]
    writes = results["tiers"].label_writes_per_minute
    row += [f"{oracle.hot_share:.2%}", "-" if writes is None else f"{writes:.1f}"]
    return "| " + " | ".join(row) + " |"


def learning_row(scenario: Scenario, results: dict[str, Summary]) -> str:
    """Returning workloads: the first bursts and the later ones."""
    ours, oracle = results["tiers"], results["oracle"]
    gap = ours.max_utilisation - oracle.max_utilisation
    later = ours.later_burst_hot_share
    oracle_later = oracle.later_burst_hot_share or 0.0
    met = later is not None and meets_goals(later, gap, oracle_later)
    return (
        f"| {scenario.name} | {share(ours.first_burst_hot_share, 2)} | {share(later, 2)} | "
        f"{share(oracle.later_burst_hot_share, 2)} | {gap:+.1%} | "
        f"{'yes' if met else 'no'} |"
    )


@dataclass(frozen=True)
class Tables:
    main: str
    verdict: str
    spread: str
    learning: str
    replicas: str
    delay: str
    counts: str
    limits: str
    shown: str

    def printed(self) -> str:
        return "\n\n".join(
            [
                self.main,
                self.verdict,
                self.spread,
                self.learning,
                self.replicas,
                self.delay,
                self.counts,
                self.limits,
                self.shown,
            ]
        )


def tables(rows: Rows) -> Tables:
    heavy_header = [
        "| scenario | replicas | bindings shown after | watch delay measured | (e) hot, every burst | (e) hot, first bursts | (d) hot | (e) max util minus (d) | meets the goals |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    shown = [row for row in rows.heavy if row.base.endswith(SHOWN_AT_ADMISSION)]
    heavy = [row for row in rows.heavy if row not in shown]
    at_once = [row for row in heavy if row.binding_delay == 0]
    by_delay = sorted(
        (row for row in heavy if not row.base.endswith("mean")),
        key=lambda row: (row.base, row.replicas, row.binding_delay),
    )
    judged = [row for row in by_delay if 0 < row.binding_delay <= GOAL_DELAY]
    apart = [row for row in by_delay if row.binding_delay == 0]
    counts = (
        f"Rows with bindings shown as a control plane shows them, up to {GOAL_DELAY:g} s: "
        f"{sum(r.meets() for r in judged)} of {len(judged)} meet the goals. The rows 'at once' "
        "(every binding shown the instant its pod is admitted, which no control plane does) "
        f"are reported apart: {sum(r.meets() for r in apart)} of {len(apart)}."
    )
    return Tables(
        "\n".join(
            [
                "| scenario | strategy | max link util | pods placed hot (>80%) | pods left Pending | std of util | largest share of a burst on one node | largest share of a burst's first preferences on one node | steered pods with a preferred node scored | steered pods on a preferred node |",
                "|---|---|---|---|---|---|---|---|---|---|",
                *rows.main,
            ]
        ),
        "\n".join(
            [
                "| scenario | (c) max util minus (d) | (c) hot | (b) hot / (c) hot | (c) meets all three goals | (e) max util minus (d) | (e) hot | (b) hot / (e) hot | (e) meets all three goals | (d) hot | (e) tier label writes per minute |",
                "|---|---|---|---|---|---|---|---|---|---|---|",
                *rows.verdicts,
            ]
        ),
        "\n".join(
            [
                "| scenario | strategy | zone skew, mean | workloads past zone skew 5 | most pods of a workload on one node, mean | workloads of 3+ pods missing a zone | draws whose spread is kept (vs (a) on the same draw) |",
                "|---|---|---|---|---|---|---|",
                *rows.spread,
            ]
        ),
        "\n".join(
            [
                "| scenario | (e) hot, first bursts of a workload | (e) hot, later bursts | (d) hot, later bursts | (e) max util minus (d) | (e) meets the goals from a workload's second burst |",
                "|---|---|---|---|---|---|",
                *rows.learning,
            ]
        ),
        "\n".join([*heavy_header, *heavy_table_rows(at_once, GOAL_DELAY)]),
        "\n".join([*heavy_header, *heavy_table_rows(by_delay, GOAL_DELAY)]),
        counts,
        "\n".join(
            [
                "| scenario | (e) hot | (d) hot | (d) knowing only each workload's mean: hot | (e) max util minus (d) | (e) max util minus that oracle |",
                "|---|---|---|---|---|---|",
                *rows.limits,
            ]
        ),
        "\n".join([*heavy_header, *heavy_table_rows(shown, GOAL_DELAY)]),
    )
