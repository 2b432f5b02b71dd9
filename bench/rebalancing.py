"""Rebalancing: nodes that turn hot after placement, with and without the
descheduler acting on the chart's recording rule and policy.

    python -m bench.rebalancing            # writes docs/benchmarks.md's section + PNG
    python -m bench.rebalancing --quick    # fewer seeds, 50 nodes only

Per seed: pods are placed as well as placement can (each on the link it
fills least), then run for two hours while a share of them grow several-fold
at random times; nodes are measured every 15 s over a 2 m rate window. With
the loop, the descheduler (bench/descheduler_model.py, with the chart's
defaults) reads the recording rule every 2 minutes and evicts; each
replacement is admitted by the real engine (bench/rebalancing_simulation.py)
and bound by kube-scheduler as bench/scheduler_model.py models it.
"""

import os
import statistics
import time
from dataclasses import replace

import numpy as np

from bench.descheduler_model import LoopPolicy
from bench.rebalancing_simulation import HOT, STEP, DriftScenario, LoopRun, simulate
from bench.report import bench_parser, write_section

MODEL_NOTE = """\
The descheduler is modelled rule by rule from its source (bench/descheduler_model.py):
a cycle every 2 minutes (the chart's default) reads each node's sample as whole percent, evicts
nothing unless some node is at or below 40% and some above 75%, takes the
over nodes busiest first and evicts one pod from each (Prometheus mode cannot
tell a pod's share), chosen among those older than 10 minutes in the
lister's order (random here: every simulated pod has the same priority and
QoS class, so the descheduler cannot prefer the heavy one). Each replacement
sends what the evicted pod sent. Not modelled: nodeFit, PodDisruptionBudgets,
graceful termination (an evicted pod stops sending at once). Nodes have
10 Gbit/s links and 8 pods each (Deployments of 3-8 replicas, median
40 MB/s a pod) beside 8% background; a node-minute is hot when the node's
busiest direction is above 80% of its link."""

DRIFT = DriftScenario(pod_median=40e6)
DEFAULTS = LoopPolicy()
AT_80 = LoopPolicy(high=80.0)
# (row, scenario, the descheduler's policy); nodes per row in the scenario.
ROWS = [
    ("50 nodes, 15% of pods grow 3-6x", replace(DRIFT, nodes=50), DEFAULTS),
    ("500 nodes, 15% of pods grow 3-6x", replace(DRIFT, nodes=500), DEFAULTS),
    ("500 nodes, 15% of pods grow 3-6x, highThreshold 80", replace(DRIFT, nodes=500), AT_80),
    ("50 nodes, no drift", replace(DRIFT, nodes=50, drift_share=0.0), DEFAULTS),
    (
        "limit: 50 nodes, 20% of pods grow 4-8x",
        replace(DRIFT, nodes=50, drift_share=0.2, drift_factor=(4.0, 8.0)),
        DEFAULTS,
    ),
]


def plot(without: LoopRun, with_loop: LoopRun, path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = np.arange(len(without.hot_nodes)) * STEP / 60
    figure, axis = plt.subplots(figsize=(9, 3.2))
    axis.step(minutes, without.hot_nodes, where="post", label="no descheduler", color="#d62728")
    axis.step(minutes, with_loop.hot_nodes, where="post", label="descheduler loop", color="#1f77b4")
    axis.set_xlabel("minutes")
    axis.set_ylabel(f"nodes above {HOT:.0%} of link")
    axis.set_title(title, fontsize=10)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="fewer seeds, 50 nodes; writes nothing"
    )
    args = parser.parse_args(argv)
    started = time.time()
    lines = [
        "| scenario | mean link util | hot node-minutes, no loop | hot node-minutes, with loop | fewer | evictions | most evictions on one node in one cycle | evictions in cycles with no node over the threshold | goal |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, scenario, policy in ROWS:
        if args.quick and scenario.nodes > 50:
            continue
        seeds = range(2 if args.quick else (6 if scenario.nodes <= 50 else 3))
        without = [simulate(scenario, None, seed) for seed in seeds]
        with_loop = [simulate(scenario, policy, seed) for seed in seeds]
        hot_without = sum(r.hot_node_minutes for r in without)
        hot_with = sum(r.hot_node_minutes for r in with_loop)
        evictions = sum(r.evictions for r in with_loop)
        most = max(r.most_evictions_per_node_in_a_cycle for r in with_loop)
        idle_evictions = sum(r.evictions_with_no_node_over for r in with_loop)
        mean_util = statistics.mean(r.mean_utilisation for r in without)
        if scenario.drift_share == 0:
            ratio = "-"
            goal = "yes" if evictions == 0 else "no"
        else:
            fewer = hot_without / hot_with if hot_with else float("inf")
            ratio = f"{fewer:.1f}x"
            met = fewer >= 5 and most <= 1 and idle_evictions == 0
            goal = "limit" if name.startswith("limit") else ("yes" if met else "no")
            if policy is not DEFAULTS:
                goal = f"{goal} (not the default)"
        lines.append(
            f"| {name} ({len(seeds)} seeds) | {mean_util:.0%} | {hot_without:,.0f} | "
            f"{hot_with:,.0f} | {ratio} | {evictions} | {most} | {idle_evictions} | {goal} |"
        )
        print(lines[-1], flush=True)
        if name == ROWS[1][0]:
            os.makedirs("docs/img", exist_ok=True)
            plot(without[0], with_loop[0], "docs/img/rebalancing-500-nodes.png", f"{name}, seed 0")
    elapsed = time.time() - started
    goals = (
        f"Goals: with drift, at least 5x fewer hot node-minutes with the loop, at most "
        f"{DEFAULTS.evictions_per_node} eviction per node per cycle and none in a cycle where no "
        "node is over the threshold; without drift, no eviction."
    )
    threshold = (
        "highThreshold 80 against the default 75: the descheduler stops evicting once a node "
        "reads at or under the threshold, so nodes settle just below it; at 80 they hover at "
        "80-81%, which counts as hot here."
    )
    limit = (
        "The limit row: when a fifth of the pods grow 4-8x the cluster's mean link "
        "utilisation passes the low threshold on most nodes, so the descheduler finds no "
        "node to move pods to and evicts little (LowNodeUtilization does nothing without "
        "an under-utilised node); more links, not rebalancing, is the fix there."
    )
    body = "\n".join(
        [MODEL_NOTE, "", *lines, "", goals, "", threshold, "", limit, "",
         "![Nodes above 80% over time, 500 nodes](img/rebalancing-500-nodes.png)", "",
         f"Run time: {elapsed:.0f} s."]
    )  # fmt: skip
    print(f"\n{elapsed:.0f}s")
    if not args.no_write and not args.quick:
        write_section(
            "rebalancing",
            "Rebalancing nodes that turn hot after placement",
            "python -m bench.rebalancing",
            body,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
