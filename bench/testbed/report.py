"""The testbed's figures, verdicts, table and plot (pure, apart from the PNG)."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.testbed.results import PolicyResult, TestbedResult
from bench.testbed.stats import percentiles

BUCKET = 5.0  # seconds per point of the p99-over-time plot


# A run is too busy to measure when the idle link's p99 beside a placement
# (the probe) is this many times the idle machine's: then the round trips
# are the machine's, not the links' (issue 61: 27-90x on a busy machine,
# 2-5x on a quiet one).
BUSY_FACTOR = 10.0


@dataclass(frozen=True)
class PolicyFigures:
    policy: str
    p50: float
    p99: float  # pooled over the latency pods' requests
    p999: float
    lost: float  # share of requests
    pod_p99_median: float  # each latency pod's own p99: the median pod's
    pod_p99_worst: float  # ... and the worst pod's
    idle_link_p99: float  # the probe's, during the same seconds
    bulk_ratio: float  # mean achieved / target
    bulk_worst: float
    hot_node_seconds: float
    latency_on_hot: int
    # Latency pods bound to a node that a bulk pod was bound to as well, at
    # any time of the run: the sharing that ranking links by traffic allows.
    latency_beside_bulk: int
    bulk_on_hot: int
    failed_pods: int
    webhook_failures: int
    # Latency pods whose own p99 was within 2x of the idle link's (the
    # probe's), of those measured.
    latency_within_2x: int = 0
    latency_measured: int = 0


def figures(result: PolicyResult) -> PolicyFigures:
    p50, p99, p999 = percentiles(result.latency, (0.5, 0.99, 0.999))
    lost = sum(1 for _, rtt in result.latency if rtt < 0) / max(1, len(result.latency))
    pods = sorted(p.p99 for p in result.placements if p.kind == "latency" and p.p99 is not None)
    ratios = [achieved / target for _, achieved, target in result.bulk]
    bulk_nodes = {p.node for p in result.placements if p.kind == "bulk"}
    idle_link = percentiles(result.probe, (0.99,))[0]
    return PolicyFigures(
        result.policy,
        p50,
        p99,
        p999,
        lost,
        _median(pods),
        pods[-1] if pods else math.nan,
        idle_link,
        float(np.mean(ratios)) if ratios else math.nan,
        min(ratios) if ratios else math.nan,
        result.hot_node_seconds,
        result.landed_hot.get("latency", 0),
        sum(1 for p in result.placements if p.kind == "latency" and p.node in bulk_nodes),
        result.landed_hot.get("bulk", 0),
        result.failed_pods,
        result.webhook_failures,
        sum(1 for p99 in pods if p99 <= 2 * idle_link),
        len(pods),
    )


def _median(values: Sequence[float]) -> float:
    """The median, the upper one of an even count (a draw that was
    measured, never an average of two); NaN of nothing."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else math.nan


def ms(seconds: float) -> str:
    if math.isnan(seconds):
        return "-"
    if math.isinf(seconds):
        return "lost"
    return f"{seconds * 1e3:.2f}"


def ratio(value: float) -> str:
    if math.isnan(value):
        return "-"
    return "inf" if math.isinf(value) else f"{value:.1f}x"


def too_busy(run: TestbedResult) -> str | None:
    """Why the run's round trips are the machine's, or None when they are
    the links': the probe beside a placement against the idle machine's."""
    idle = percentiles(run.idle, (0.99,))[0]
    for result in run.policies:
        probe = figures(result).idle_link_p99
        if not probe <= BUSY_FACTOR * idle:  # NaN (nothing measured) is too busy too
            return (
                f"the idle link's p99 beside {result.policy} was {ms(probe)} ms,"
                f" {ratio(probe / idle)} the idle machine's {ms(idle)} ms"
                f" (more than {BUSY_FACTOR:g}x)"
            )
    return None


@dataclass(frozen=True)
class Verdict:
    goal: str
    figures: str
    met: bool | None  # None: the goal does not apply to what was measured


def _by_policy(run: TestbedResult) -> dict[str, PolicyFigures]:
    return {r.policy: figures(r) for r in run.policies}


def verdicts(runs: Sequence[TestbedResult]) -> list[Verdict]:
    """The issue's goals over the draws (each run its own): the latency
    goals on the runs the machine could measure (``too_busy``), the
    placement, bulk and cleanup goals on every run."""
    found: list[Verdict] = []
    figured = [_by_policy(run) for run in runs]
    busy = [too_busy(run) for run in runs]
    for number, reason in enumerate(busy, start=1):
        if reason is not None:
            found.append(Verdict(f"run {number}: too busy to measure", reason, None))
    measured = [f for f, reason in zip(figured, busy, strict=True) if reason is None]
    count = f"{len(measured)} of {len(runs)} draws measured"
    pairs = [
        (f["nettraffic"], f.get("default"), f.get("optimum")) for f in measured if "nettraffic" in f
    ]
    shares = [(ours, best) for ours, _, best in pairs if best is not None]
    found.append(
        Verdict(
            "latency pods within 2x of the idle link's p99: nettraffic's at least as many as the"
            " class-blind optimum's, in every draw",
            "each draw, nettraffic / the optimum: "
            + ", ".join(
                f"{ours.latency_within_2x} / {best.latency_within_2x} of {ours.latency_measured}"
                for ours, best in shares
            )
            + f"; {count}",
            all(ours.latency_within_2x >= best.latency_within_2x for ours, best in shares)
            if shares
            else None,
        )
    )
    hot = [(ours, default) for ours, default, _ in pairs if default and default.latency_on_hot]
    defaults = [f["default"] for f in figured if "default" in f]
    share = sum(1 for d in defaults if d.latency_on_hot) / max(1, len(defaults))
    better = [default.p99 / ours.p99 for ours, default in hot]
    found.append(
        Verdict(
            "latency p99 at least 5x better than the default scheduler's, median over the"
            " draws where it puts a latency pod on a hot link",
            f"{ratio(_median(better))} (each such draw: {', '.join(ratio(v) for v in better)});"
            f" the default put one there in {share:.0%} of {len(defaults)} draws",
            _median(better) >= 5.0 if better else None,
        )
    )
    ours_on_hot = [f["nettraffic"].latency_on_hot for f in figured if "nettraffic" in f]
    found.append(
        Verdict(
            "nettraffic puts no latency pod on a hot link in any draw",
            f"each draw: {', '.join(str(v) for v in ours_on_hot)}",
            not any(ours_on_hot) if ours_on_hot else None,
        )
    )
    p99s = [ours.p99 for ours, _, _ in pairs]
    finite = [v for v in p99s if math.isfinite(v)]
    spread = max(finite) / min(finite) - 1 if len(finite) == len(p99s) >= 2 else math.inf
    best = [o.p99 for _, _, o in pairs if o is not None]
    found.append(
        Verdict(
            "nettraffic's p99 repeatable within 20% across the draws",
            f"{', '.join(ms(v) for v in p99s)} ms (spread {spread:.0%}); the optimum's"
            f" {', '.join(ms(v) for v in best)} ms",
            spread <= 0.2 if len(p99s) >= 2 else None,
        )
    )
    bulk = [
        (f["nettraffic"].bulk_ratio, f["optimum"].bulk_ratio)
        for f in figured
        if "nettraffic" in f and "optimum" in f
    ]
    found.append(
        Verdict(
            "bulk pods sent within 10% of what they did under the optimum, in every draw",
            "each draw: " + ", ".join(f"{ours:.1%} vs {best:.1%} of target" for ours, best in bulk),
            all(ours >= 0.9 * best for ours, best in bulk) if bulk else None,
        )
    )
    left = [", ".join(run.leftovers) for run in runs if run.leftovers]
    found.append(Verdict("nothing left behind", "; ".join(left) or "none", not left))
    return found


def headline(runs: Sequence[TestbedResult]) -> str:
    """Each policy's figures over the draws the machine could measure:
    the median draw and the worst."""
    measured = [_by_policy(run) for run in runs if too_busy(run) is None]
    rows = [
        "| placement | p99 ms, pooled | p99 ms, median pod | p99 ms, worst pod | latency pods on a"
        " hot link (draws with any) | bulk sent / target |",
        "|---|---|---|---|---|---|",
    ]
    policies = [r.policy for r in runs[0].policies] if runs else []
    for policy in policies:
        each = [f[policy] for f in measured if policy in f]
        if not each:
            continue

        def worst_of(values: list[float]) -> str:  # round trips: the highest is the worst
            return f"{ms(_median(values))} / {ms(max(values))}"

        on_hot = [f.latency_on_hot for f in each]
        bulk = [f.bulk_ratio for f in each]
        rows.append(
            f"| {policy} | {worst_of([f.p99 for f in each])} |"
            f" {worst_of([f.pod_p99_median for f in each])} |"
            f" {worst_of([f.pod_p99_worst for f in each])} |"
            f" {sum(on_hot)} ({sum(1 for v in on_hot if v)} of {len(each)}) |"
            f" {_median(bulk):.1%} / {min(bulk):.1%} |"
        )
    return "\n".join(rows)


def table(run: TestbedResult) -> str:
    rows = [
        "| placement | latency p50 ms | p99 ms | p99.9 ms | p99 ms, median pod | p99 ms, worst pod"
        " | lost | p99 / idle link's | latency pods on a hot node | latency pods beside a bulk pod"
        " | bulk sent / target (worst) | data pushes' rate / link | node-seconds above 80%"
        " | bulk pods on a hot node | failed pods | webhook failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in run.policies:
        f = figures(result)
        rows.append(
            f"| {f.policy} | {ms(f.p50)} | {ms(f.p99)} | {ms(f.p999)} | {ms(f.pod_p99_median)} |"
            f" {ms(f.pod_p99_worst)} | {f.lost:.2%} |"
            f" {ratio(f.p99 / f.idle_link_p99)} | {f.latency_on_hot} | {f.latency_beside_bulk} |"
            f" {f.bulk_ratio:.1%} ({f.bulk_worst:.1%}) | {result.push_ratio:.1%} |"
            f" {f.hot_node_seconds:.0f} | {f.bulk_on_hot} |"
            f" {f.failed_pods} | {f.webhook_failures} |"
        )
    idle50, idle99 = percentiles(run.idle, (0.5, 0.99))
    probes = ", ".join(f"{r.policy} {ms(figures(r).idle_link_p99)}" for r in run.policies)
    rows.append("")
    rows.append(
        f"Idle machine, idle link: p50 {ms(idle50)} ms, p99 {ms(idle99)} ms. The idle link's p99"
        f" beside each placement (the probe): {probes} ms. The machine was"
        f" {run.cpu_busy:.0%} busy over the run (2 cores)."
    )
    reason = too_busy(run)
    if reason is not None:
        rows.append(f"Too busy to measure: {reason}; its round trips are left out of the goals.")
    return "\n".join(rows)


def placements(result: PolicyResult) -> str:
    rows = [
        "| created s | pod | kind | node | preferred | bandwidth from | its p99 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for placed in sorted(result.placements, key=lambda p: p.created):
        p99 = ms(placed.p99) if placed.p99 is not None else "-"
        rows.append(
            f"| {placed.created:.1f} | {placed.pod} | {placed.kind} | {placed.node} |"
            f" {','.join(placed.preferred) or '-'} | {placed.bandwidth_source or '-'} | {p99} |"
        )
    return "\n".join(rows)


def p99_over_time(
    result: PolicyResult, pairs: Sequence[tuple[float, float]]
) -> tuple[list[float], list[float]]:
    """(seconds since the policy's start, p99 ms) per BUCKET."""
    buckets: dict[int, list[tuple[float, float]]] = {}
    for at, rtt in pairs:
        buckets.setdefault(int((at - result.started) // BUCKET), []).append((at, rtt))
    times, values = [], []
    for key in sorted(buckets):
        times.append((key + 0.5) * BUCKET)
        p99 = percentiles(buckets[key], (0.99,))[0]
        values.append(min(p99, 1.0) * 1e3)  # a lost request plotted at the 1 s timeout
    return times, values


def plot(run: TestbedResult, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(8, 4.2))
    for result in run.policies:
        times, values = p99_over_time(result, result.latency)
        axis.plot(times, values, label=result.policy, marker=".")
    first = run.policies[0]
    times, values = p99_over_time(first, first.probe)
    axis.plot(times, values, label="idle link (probe)", color="grey", linestyle="--")
    axis.set_yscale("log")
    axis.set_xlabel("seconds since the first pod of the placement was created")
    axis.set_ylabel(f"latency pods' p99 RTT per {BUCKET:g} s (ms)")
    axis.set_title("What a latency-sensitive pod feels, by placement (real packets)")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
