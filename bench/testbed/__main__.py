"""Steering judged on real packets: an emulated cluster on this machine.

Nodes are network namespaces whose links tc shapes to a set rate, each with
Debian's prometheus-node-exporter; a real Prometheus scrapes them; the real
webhook (gunicorn over TLS) steers pods that are real processes: bulk
senders (iperf3) and latency-sensitive clients (1,000 small UDP requests a
second). The same arrivals run under nettraffic, under the default
scheduler alone and under the exact class-blind optimum, and the report says what the latency
pods felt, what the bulk pods achieved and how long links were hot. Needs
root; everything it creates is removed at the end, also on failure.
"""

import os
import signal
import sys
import time
from dataclasses import replace

from bench.report import bench_parser, drawn_seed, rerun_command, write_section
from bench.testbed.report import BUSY_FACTOR, headline, placements, plot, table, verdicts
from bench.testbed.results import TestbedResult
from bench.testbed.run import run_testbed
from bench.testbed.settings import TestbedSettings, short_settings
from bench.testbed.workload import Mix


def plot_path(label: str) -> str:
    return os.path.join("docs", "img", f"testbed{'-' + label if label else ''}-p99.png")


def _section(runs: list[TestbedResult], plot_file: str) -> str:
    first = runs[0]
    s = first.settings
    parts = [
        f"{s.nodes} nodes with {s.link_bits / 1e6:g} Mbit/s links, {s.hot_nodes} of them hot from a"
        f" greedy upload; {sum(1 for _ in s.mix.arrivals(s.seed))} pods arriving over"
        f" {s.mix.spread:g} s ({sum(a.kind == 'bulk' for a in s.mix.arrivals(s.seed))} bulk senders at"
        f" {s.mix.bulk_bits / 1e6:g} Mbit/s, {s.mix.latency_pods} latency pods at 1,000 requests/s,"
        f" {s.mix.exiting_pods} whose process exits at once), held {s.hold:g} s; Prometheus scrapes"
        f" every {s.scrape_interval:g} s, the webhook's window is {s.window:g} s. Each pod is bound"
        f" {s.bind_delay[0] * 1e3:.0f}-{s.bind_delay[1] * 1e3:.0f} ms after its creation."
        + (
            " TCP sizes its bursts as the kernel does for a peer microseconds away (up to"
            " 64 KiB at once, `tcp_tso_rtt_log` 9)."
            if s.kernel_tcp_bursts
            else " TCP sizes its bursts by its pacing rate alone (`tcp_tso_rtt_log` 0): a"
            " millisecond of its rate, not the 64 KiB the kernel allows a peer microseconds away."
        )
        + " docs/design/testbed.md says how the testbed is built and what it leaves out.",
        "",
    ]
    parts += [
        f"Each run draws anew (seed {runs[0].settings.seed} on): the arrivals, which nodes are"
        " hot and the scheduler's ties. Over the draws the machine could measure (a draw whose"
        f" idle link beside a placement had a p99 more than {BUSY_FACTOR:g}x the idle machine's"
        " is left out of the round trips), the median draw / the worst:",
        "",
        headline(runs),
        "",
    ]
    for number, run in enumerate(runs, start=1):
        parts += [f"Run {number} (seed {run.settings.seed}):", "", table(run), ""]
    parts += ["Goals, judged on the figures above:", ""]
    parts += ["| goal | figures | met |", "|---|---|---|"]
    for verdict in verdicts(runs):
        met = {True: "yes", False: "**no**", None: "does not apply"}[verdict.met]
        parts.append(f"| {verdict.goal} | {verdict.figures} | {met} |")
    parts.append("")
    parts.append(f"![p99 over time, run 1]({os.path.relpath(plot_file, 'docs')})")
    parts.append("")
    for result in first.policies:
        if result.policy != "optimum":
            parts += [f"Where run 1 placed each pod, {result.policy}:", "", placements(result), ""]
    ours = next((r for r in first.policies if r.policy == "nettraffic"), None)
    if ours is not None and ours.top_at_peak:
        parts += [
            "`kubectl nettraffic top -o wide` halfway through the hold (run 1, nettraffic):",
            "",
            "```",
            ours.top_at_peak,
            "```",
            "",
        ]
    faulted = next((r for r in first.policies if r.policy == "nettraffic-faults"), None)
    if faulted is not None:
        steered_after = [
            p for p in faulted.placements if p.created > 0 and p.preferred and p.kind != "exits"
        ]
        parts += [
            f"Faults (run 1): {'; '.join(faulted.notes)}. Pods admitted after the first fault"
            f" that still got preferred nodes: {len(steered_after)}; webhook failures:"
            f" {faulted.webhook_failures}. `top` right after the restart:",
            "",
            "```",
            faulted.top_after_fault,
            "```",
            "",
        ]
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--runs", type=int, default=5, help="draws, each a whole run of its own (default 5)"
    )
    parser.add_argument("--nodes", type=int, default=TestbedSettings.nodes)
    parser.add_argument("--hot-nodes", type=int, default=TestbedSettings.hot_nodes)
    parser.add_argument("--link-mbit", type=float, default=TestbedSettings.link_bits / 1e6)
    parser.add_argument(
        "--seed", type=int, help="the first run's seed (default: drawn); run n has seed + n - 1"
    )
    parser.add_argument("--bulk-per-workload", type=int, default=Mix.bulk_per_workload)
    parser.add_argument("--latency-pods", type=int, default=Mix.latency_pods)
    parser.add_argument("--no-faults", action="store_true", help="skip the run with faults")
    parser.add_argument(
        "--kernel-tcp-bursts",
        action="store_true",
        help="TCP bursts as the kernel sizes them for near peers (tcp_tso_rtt_log 9), "
        "not by pacing rate alone",
    )
    parser.add_argument("--short", action="store_true", help="the suite's short form")
    parser.add_argument(
        "--label", default="", help="a name for this setting's own section and plot in the docs"
    )
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the testbed is torn down either way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    settings = short_settings() if args.short else TestbedSettings()
    if not args.short:
        settings = replace(
            settings,
            nodes=args.nodes,
            hot_nodes=args.hot_nodes,
            link_bits=args.link_mbit * 1e6,
            faults=not args.no_faults,
            kernel_tcp_bursts=args.kernel_tcp_bursts,
            mix=replace(
                settings.mix,
                bulk_per_workload=args.bulk_per_workload,
                latency_pods=args.latency_pods,
            ),
        )
    seed = drawn_seed(args.seed)
    runs = []
    for number in range(args.runs):
        started = time.time()
        # The faults run once, in the first draw (its section reads run 1).
        drawn = replace(settings, seed=seed + number, faults=settings.faults and not number)
        runs.append(run_testbed(drawn))
        print(
            f"\nRun {number + 1}, seed {drawn.seed} ({time.time() - started:.0f} s):"
            f"\n{table(runs[-1])}\n",
            flush=True,
        )
    print(headline(runs))
    for verdict in verdicts(runs):
        met = {True: "met", False: "NOT MET", None: "n/a"}[verdict.met]
        print(f"[{met}] {verdict.goal}: {verdict.figures}")
    if not args.no_write and not args.short:
        plot_file = plot_path(args.label)
        os.makedirs(os.path.dirname(plot_file), exist_ok=True)
        plot(runs[0], plot_file)
        command = rerun_command("bench.testbed", argv, args.seed, seed)
        name = "testbed" + (f"-{args.label}" if args.label else "")
        title = "Real packets: an emulated cluster" + (f" ({args.label})" if args.label else "")
        write_section(name, title, command, _section(runs, plot_file))
    return 0


if __name__ == "__main__":
    sys.exit(main())
