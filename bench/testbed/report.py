"""The testbed's figures, verdicts, table and plot (pure, apart from the PNG)."""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bench.testbed.results import PolicyResult, TestbedResult
from bench.testbed.stats import percentiles

BUCKET = 5.0  # seconds per point of the p99-over-time plot


@dataclass(frozen=True)
class PolicyFigures:
    policy: str
    p50: float
    p99: float
    p999: float
    lost: float  # share of requests
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


def figures(result: PolicyResult) -> PolicyFigures:
    p50, p99, p999 = percentiles(result.latency, (0.5, 0.99, 0.999))
    lost = sum(1 for _, rtt in result.latency if rtt < 0) / max(1, len(result.latency))
    ratios = [achieved / target for _, achieved, target in result.bulk]
    bulk_nodes = {p.node for p in result.placements if p.kind == "bulk"}
    return PolicyFigures(
        result.policy,
        p50,
        p99,
        p999,
        lost,
        percentiles(result.probe, (0.99,))[0],
        float(np.mean(ratios)) if ratios else math.nan,
        min(ratios) if ratios else math.nan,
        result.hot_node_seconds,
        result.landed_hot.get("latency", 0),
        sum(1 for p in result.placements if p.kind == "latency" and p.node in bulk_nodes),
        result.landed_hot.get("bulk", 0),
        result.failed_pods,
        result.webhook_failures,
    )


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


@dataclass(frozen=True)
class Verdict:
    goal: str
    figures: str
    met: bool | None  # None: the goal does not apply to what was measured


def verdicts(runs: Sequence[TestbedResult]) -> list[Verdict]:
    """The issue's goals, judged on every run's figures."""
    found: list[Verdict] = []
    for number, run in enumerate(runs, start=1):
        by_policy = {r.policy: figures(r) for r in run.policies}
        ours, default, oracle = (by_policy.get(p) for p in ("nettraffic", "default", "oracle"))
        tag = f"run {number}: "
        if ours is not None:
            within = ours.p99 / ours.idle_link_p99
            text = f"{ms(ours.p99)} ms vs {ms(ours.idle_link_p99)} ms ({ratio(within)})"
            if oracle is not None:
                text += f"; the oracle's {ratio(oracle.p99 / oracle.idle_link_p99)}"
            found.append(
                Verdict(
                    tag + "nettraffic's latency p99 within 2x of the idle link's",
                    text,
                    within <= 2.0,
                )
            )
        if ours is not None and default is not None:
            better = default.p99 / ours.p99
            applies = default.latency_on_hot > 0
            found.append(
                Verdict(
                    tag + "latency p99 at least 5x better than the default scheduler's"
                    " (where it puts any latency pod on a hot node)",
                    f"{ms(default.p99)} ms vs {ms(ours.p99)} ms ({ratio(better)}); the default put"
                    f" {default.latency_on_hot} latency pods on a hot node",
                    better >= 5.0 if applies else None,
                )
            )
        if ours is not None and oracle is not None:
            share = ours.bulk_ratio / oracle.bulk_ratio
            found.append(
                Verdict(
                    tag + "bulk throughput within 10% of the oracle's",
                    f"{ours.bulk_ratio:.1%} vs {oracle.bulk_ratio:.1%} of target ({share:.1%})",
                    share >= 0.9,
                )
            )
        found.append(
            Verdict(
                tag + "nothing left behind", ", ".join(run.leftovers) or "none", not run.leftovers
            )
        )
    if len(runs) >= 2:
        for policy in ("nettraffic", "default", "oracle"):
            each = [figures(r) for run in runs for r in run.policies if r.policy == policy]
            p99s = [f.p99 for f in each]
            if len(p99s) < 2:
                continue
            finite = [v for v in p99s if math.isfinite(v)]
            if len(finite) == len(p99s):
                spread = max(p99s) / min(p99s) - 1
                met: bool | None = spread <= 0.2
                # Judged on the p99 itself; its ratio to the idle link beside
                # it says how much of a spread is the machine's own.
                text = (
                    f"{', '.join(ms(v) for v in p99s)} ms (spread {spread:.0%}); against the idle"
                    f" link beside each {', '.join(ratio(f.p99 / f.idle_link_p99) for f in each)}"
                )
            else:
                met = not finite  # lost in every run is repeatable; in some only is not
                text = f"{', '.join(ms(v) for v in p99s)} ms"
            found.append(Verdict(f"{policy}'s p99 repeatable within 20% over the runs", text, met))
    return found


def table(run: TestbedResult) -> str:
    rows = [
        "| placement | latency p50 ms | p99 ms | p99.9 ms | lost | p99 / idle link's | latency pods"
        " on a hot node | latency pods beside a bulk pod | bulk sent / target (worst) | data pulls'"
        " rate / link | node-seconds above 80% | bulk pods on a hot node | failed pods | webhook"
        " failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in run.policies:
        f = figures(result)
        rows.append(
            f"| {f.policy} | {ms(f.p50)} | {ms(f.p99)} | {ms(f.p999)} | {f.lost:.2%} |"
            f" {ratio(f.p99 / f.idle_link_p99)} | {f.latency_on_hot} | {f.latency_beside_bulk} |"
            f" {f.bulk_ratio:.1%} ({f.bulk_worst:.1%}) | {result.pull_ratio:.1%} |"
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
