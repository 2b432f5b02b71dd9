"""bench.peers' placements, draw by draw and without the solver: each seed's
cross-zone and inter-node bytes under (a') kube-scheduler alone with other
ties, (b) nettraffic without a flow source and (c) with peers, each over
(a) kube-scheduler alone's, and the workloads of 3 pods or more each
leaves short of a zone (a) gives them; to tell how often a placement
passes kube-scheduler alone from one draw's ties. Prints only.

    python -m bench.peer_seeds --traffic-distribution PreferSameZone --seed 40411394 --count 20

Run it in two worktrees (the change and the commit before; copy this file
into one that predates it) with the same seeds to compare a change draw
for draw: each seed draws the same graph, cluster, orders and ties in
both.
"""

import argparse
import functools
import multiprocessing
import statistics
from dataclasses import replace

from bench.peer_simulation import SimulationOptions, simulate
from bench.peers import SCALES, add_model_arguments, bytes_ratio, simulation_options, zones_lost

PLACEMENTS = {"(a')": "default", "(b)": "nettraffic", "(c)": "peers"}
LOST = "zones lost"


def _cell(column: str, value: float) -> str:
    return f"{value:g}" if column.endswith(LOST) else f"{value:.3f}"


def ratios(nodes: int, factor: int, options: SimulationOptions, seed: int) -> dict[str, float]:
    """One draw's bytes per placement over kube-scheduler alone's, keyed
    "(b) cross-zone", "(b) inter-node" and so on, the workloads each
    leaves short of a zone (a) keeps ("(b) zones lost"), and (a)'s own MB/s."""
    default = simulate(nodes, factor, "default", seed, options)
    row = {"(a) cross-zone MB/s": default.cross_zone / 1e6}
    for label, strategy in PLACEMENTS.items():
        ties = replace(options, ties=2) if label == "(a')" else options
        outcome = simulate(nodes, factor, strategy, seed, ties)
        row[f"{label} cross-zone"] = bytes_ratio(outcome.cross_zone, default.cross_zone)
        row[f"{label} inter-node"] = bytes_ratio(outcome.inter_node, default.inter_node)
        row[f"{label} {LOST}"] = zones_lost(outcome, default)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True, help="the first seed")
    parser.add_argument("--count", type=int, default=20, help="seeds (default 20)")
    parser.add_argument("--scale", choices=[name for name, _, _ in SCALES], default=SCALES[0][0])
    add_model_arguments(parser)
    args = parser.parse_args(argv)
    nodes, factor = next((n, f) for name, n, f in SCALES if name == args.scale)
    options = simulation_options(args)
    seeds = range(args.seed, args.seed + args.count)
    columns = ["(a) cross-zone MB/s"] + [
        f"{label} {measure}"
        for label in PLACEMENTS
        for measure in ("cross-zone", "inter-node", LOST)
    ]
    print(f"{args.scale}, {args.traffic_distribution}; bytes over (a)'s, draw by draw:\n")
    print("| seed | " + " | ".join(columns) + " |\n" + "|---" * (len(columns) + 1) + "|")
    rows = []
    with multiprocessing.Pool() as pool:  # one process per core
        for seed, row in zip(
            seeds, pool.imap(functools.partial(ratios, nodes, factor, options), seeds), strict=True
        ):
            rows.append(row)
            print(f"| {seed} | " + " | ".join(_cell(c, row[c]) for c in columns) + " |", flush=True)
    print("\n| placement, measure | median | worst | draws above 1 (zones lost: above 0) |")
    print("|---|---|---|---|")
    for column in columns[1:]:
        values = [row[column] for row in rows]
        above = sum(value > (0 if column.endswith(LOST) else 1) for value in values)
        median, worst = _cell(column, statistics.median(values)), _cell(column, max(values))
        print(f"| {column} | {median} | {worst} | {above} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
