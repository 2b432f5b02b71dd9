"""The peer testbed's report over its runs: each placement's latency and
bytes, the peers' against the default's and against the least any
placement of the clients sends across zones, and the verdicts."""

import math
import statistics
from collections.abc import Callable

from bench.peer_testbed_figures import (
    CLIENTS_P99_GOAL,
    CROSS_ZONE_GOAL,
    NODES,
    REQUESTS_PER_SECOND,
    RESPONSE_BYTES,
    ZONE_DELAY_MS,
    Figures,
    median_pod_p99,
)
from bench.peer_testbed_verdicts import verdicts
from bench.testbed.zones import ZONES

LEAST = "bytes across zones, the least any placement of the clients sends"


def _ratio(measure: Callable[[Figures], float]) -> Callable[[Figures, Figures], float]:
    """peers' figure over the default's; NaN when the default's is not above 0."""

    def ratio(peers: Figures, default: Figures) -> float:
        below = measure(default)
        return measure(peers) / below if below > 0 else math.nan

    return ratio


def _least_against_default(peers: Figures, default: Figures) -> float:
    """The run's least share across zones over what the default sent there."""
    sent = default.cross_zone
    return peers.least_cross_zone / sent if sent > 0 else math.nan


def _row(run: int, figures: Figures) -> str:
    worst_pod = max(figures.pod_p99s_ms, default=float("nan"))
    zones = sorted(f"{z}" for pods, z in figures.zones.values() if pods >= 3)
    return (
        f"| {run} | {figures.policy} | {figures.p99_ms:.2f} | {median_pod_p99(figures):.2f}"
        f" | {worst_pod:.2f} | {figures.probe_p99_ms:.2f}"
        f" | {figures.pods_near()} of {len(figures.pod_p99s_ms)}"
        f" | {figures.inter_node:.0%} | {figures.cross_zone:.0%} | {', '.join(zones) or '-'}"
        f" | {figures.bytes_per_second / 1e6:.2f} | {figures.webhook_failures} |"
    )


def report(runs: list[list[Figures]], hold: float, prefer_same_zone: bool = False) -> str:
    idle = [f"{run[0].idle_probe_ms:.2f}" for run in runs if run]
    lines = [
        f"{NODES} nodes in {len(ZONES)} zones, {ZONE_DELAY_MS * 2:g} ms more round trip between"
        f" zones; each run draws 3 servers of 1-2 pods and 4 client workloads of 2-3 pods, each"
        f" calling one server {REQUESTS_PER_SECOND} times a second for {RESPONSE_BYTES:,} bytes;"
        f" each placement rolls out the servers and then the clients, measured over {hold:g} s;"
        " the default rolls out twice (default-again), to measure the run-to-run noise."
        + (
            " The Services carry trafficDistribution: PreferSameZone."
            if prefer_same_zone
            else " The Services spread connections over every server pod."
        )
        + " bench/peer_testbed.py says how the testbed is built.",
        "",
        "The probe is a client and its server in one zone on two nodes, outside every"
        " placement: its p99 is the round trip within a zone at that moment. A client pod is"
        " near its server when its own p99 is within half the zones' round trip of the probe's."
        + (
            f" The probe's p99 on the idle testbed, draw by draw: {', '.join(idle)} ms."
            if idle
            else ""
        ),
        "",
        "| run | placement | p99 ms (pooled) | p99 ms (median pod) | p99 ms (worst pod)"
        " | probe p99 ms | client pods near | bytes across nodes | bytes across zones"
        " | zones of each 3-pod workload | MB/s | webhook failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for number, figures in enumerate(runs, start=1):
        lines += [_row(number, f) for f in figures]
    lines += ["", "Against the default scheduler in the same run (peers / default):", ""]
    lines += ["| measure | median | worst | goal | met in every run |", "|---|---|---|---|---|"]
    by_run = [{f.policy: f for f in figures} for figures in runs]  # policy -> figures
    ratios_of: dict[str, list[float]] = {}
    for name, ratio, goal in (
        ("request p99 (pooled)", _ratio(lambda f: f.p99_ms), CLIENTS_P99_GOAL),
        ("request p99 (median client pod)", _ratio(median_pod_p99), None),
        ("bytes across zones", _ratio(lambda f: f.cross_zone), CROSS_ZONE_GOAL),
        (LEAST, _least_against_default, None),
        ("bytes across nodes", _ratio(lambda f: f.inter_node), None),
    ):
        ratios = ratios_of[name] = [
            r
            for by in by_run
            if "default" in by and "nettraffic-peers" in by
            for r in [ratio(by["nettraffic-peers"], by["default"])]
            if math.isfinite(r)
        ]
        if not ratios:
            continue
        met = "-" if goal is None else ("yes" if max(ratios) <= goal else "**no**")
        goal_text = "-" if goal is None else f"at most {goal:.0%}"
        lines.append(
            f"| {name} | {statistics.median(ratios):.0%} | {max(ratios):.0%} | {goal_text} | {met} |"
        )
    least = [by["nettraffic-peers"].least_cross_zone for by in by_run if "nettraffic-peers" in by]
    split = sum(share > 0 for share in least)
    if split:
        # Every client pod sends as many requests (8-12 pods: a tenth each or
        # so); where its server is split a third or more of them cross zones,
        # well above the 1% a p99 leaves out.
        lines += [
            "",
            "The least share of the clients' bytes any placement of them sends across zones,"
            " with the servers where nettraffic-peers placed them, run by run: "
            + ", ".join(f"{share:.0%}" for share in least)
            + f". In {split} of {len(least)} runs it is above 0: a server's pods sit in more"
            " than one zone, so a share of its clients' requests cross zones wherever they run,"
            " and the pooled p99 is the cross-zone round trip under every placement.",
        ]
    beyond = sum(ratio > CROSS_ZONE_GOAL for ratio in ratios_of[LEAST])
    if beyond:
        lines += [
            "",
            f"In {beyond} of {len(ratios_of[LEAST])} runs even that least is above"
            f" {CROSS_ZONE_GOAL:.0%} of the default's bytes across zones: no placement of the"
            " clients beside those servers meets that goal there.",
        ]
    gaps = [
        by["nettraffic-peers"].cross_zone - by["oracle"].cross_zone
        for by in by_run
        if "nettraffic-peers" in by and "oracle" in by
    ]
    if gaps:
        lines += [
            "",
            "Bytes across zones with peers, against the oracle's in the same run: median"
            f" {statistics.median(gaps) * 100:+.0f} points, worst {max(gaps) * 100:+.0f} points"
            " (the oracle's clients sit beside servers the scheduler stand-in placed; below zero:"
            " the product's servers and clients together crossed less, or it put more of a"
            " workload on one node than the oracle's spread allows)."
            + (
                " With PreferSameZone a client in a zone that holds one of its server's pods"
                " sends nothing across zones."
                if prefer_same_zone
                else " Neither goes below the share that a client's connections to its server's"
                " pods in other zones carry: with a server's pods in two zones, half."
            ),
        ]
    lines += ["", "Goals, judged draw by draw on the figures above:", ""]
    lines += ["| goal | figures | met |", "|---|---|---|"]
    for verdict in verdicts(runs):
        met = {True: "yes", False: "**no**", None: "does not apply"}[verdict.met]
        lines.append(f"| {verdict.goal} | {verdict.figures} | {met} |")
    return "\n".join(lines)
