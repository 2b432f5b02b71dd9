"""How many nodes the testbed's two cores carry: the same run (nettraffic's
placement, one draw) at growing node counts, the pods growing with the
nodes (a latency pod per node, a quarter of the nodes hot, a bulk pod per
workload for every eight nodes), until the idle link beside it says the
machine was too busy to measure (bench/testbed/report.py, ``too_busy``).

    python -m bench.testbed.capacity [--nodes 8,12,16,24]

Needs root, as bench.testbed does; everything it creates is removed at the
end, also on failure.
"""

import signal
import sys
import time
from dataclasses import replace

from bench.report import bench_parser, drawn_seed, rerun_command, write_section
from bench.testbed.report import BUSY_FACTOR, figures, ms, ratio, too_busy
from bench.testbed.results import TestbedResult
from bench.testbed.run import run_testbed
from bench.testbed.settings import TestbedSettings
from bench.testbed.stats import percentiles
from bench.testbed.workload import Mix

COUNTS = (8, 12, 16, 24)


def settings_for(nodes: int, seed: int) -> TestbedSettings:
    """The default run's density at ``nodes`` nodes, nettraffic alone."""
    return replace(
        TestbedSettings(),
        nodes=nodes,
        hot_nodes=max(1, nodes // 4),
        mix=replace(Mix(), latency_pods=nodes, bulk_per_workload=max(1, nodes // 8)),
        policies=("nettraffic",),
        faults=False,
        seed=seed,
    )


def row(run: TestbedResult) -> str:
    s = run.settings
    ours = figures(run.policies[0])
    idle = percentiles(run.idle, (0.99,))[0]
    pods = len(s.mix.arrivals(s.seed))
    verdict = "too busy" if too_busy(run) else "measurable"
    return (
        f"| {s.nodes} | {pods} ({s.mix.latency_pods} latency) | {run.cpu_busy:.0%} |"
        f" {ms(idle)} | {ms(ours.idle_link_p99)} ({ratio(ours.idle_link_p99 / idle)}) |"
        f" {ms(ours.p99)} | {ours.latency_on_hot} | {verdict} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--nodes", default=",".join(map(str, COUNTS)), help="node counts, in the order run"
    )
    parser.add_argument("--seed", type=int, help="each count's draw (default: drawn)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    seed = drawn_seed(args.seed)
    started = time.time()
    rows, carried, busy_at = [], 0, 0
    for nodes in (int(n) for n in args.nodes.split(",")):
        run = run_testbed(settings_for(nodes, seed))
        rows.append(row(run))
        print(rows[-1], flush=True)
        if too_busy(run):
            busy_at = nodes
            break
        carried = nodes
    table = "\n".join(
        [
            "| nodes | pods | machine busy | idle machine's p99 ms | idle link's p99 beside the run"
            " ms | nettraffic's latency p99 ms (pooled) | latency pods on a hot link | run |",
            "|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    verdict = (
        f"The two cores carried {carried} nodes at the default run's density"
        if carried
        else "Not even the first count was measurable"
    ) + (
        f"; at {busy_at} the idle link's p99 was more than {BUSY_FACTOR:g}x the idle machine's."
        if busy_at
        else "; every count tried was measurable."
    )
    print(f"\n{table}\n\n{verdict}\n{time.time() - started:.0f} s")
    if not args.no_write:
        write_section(
            "testbed-capacity",
            "Real packets: how many nodes two cores carry",
            rerun_command("bench.testbed.capacity", argv, args.seed, seed),
            "nettraffic's placement alone, one draw a count, the pods growing with the nodes (a"
            " latency pod per node, a quarter of the nodes hot, a bulk pod per workload for"
            " every eight nodes). A count is too busy to measure when the idle link beside the"
            f" run has a p99 more than {BUSY_FACTOR:g}x the idle machine's; the search stops"
            f" there.\n\n{table}\n\n{verdict}\n\nRun time: {time.time() - started:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
