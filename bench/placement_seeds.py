"""One bench.placement row, seed by seed: each seed's busiest link and hot
pods under a strategy, to tell a change's effect on a row from its seeds'
ties. Prints only.

    python -m bench.placement_seeds --row "50 nodes, heavy new workloads among light pods already learned, 3 replicas, bindings shown after 500 ms" --seed 29289141 --count 60

Run it in two worktrees (the change and the commit before; copy this file
into one that predates it) with the same seeds: each seed draws the same
cluster, bursts and ties in both, so the seeds placed alike, better and
worse, and the mean gap to the oracle (``--strategy oracle``, once),
compare draw for draw.
"""

import argparse
import functools
import multiprocessing

from bench.placement_scenarios import Scenario, part_scenarios
from bench.placement_simulation import STRATEGIES, simulate


def busiest(scenario: Scenario, strategy: str, seed: int) -> tuple[int, float, int, int]:
    """The seed, its busiest link's utilisation, its pods placed hot and its pods placed."""
    run, utilisation = simulate(scenario, strategy, seed)
    return seed, float(utilisation.max()), run.hot, len(run.placements)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--row", required=True, help="a scenario's name, as the tables print it")
    parser.add_argument("--seed", type=int, required=True, help="the first seed")
    parser.add_argument("--count", type=int, default=60, help="seeds (default 60)")
    parser.add_argument("--strategy", choices=STRATEGIES, default="tiers")
    args = parser.parse_args(argv)
    seeds = range(args.seed, args.seed + args.count)
    scenarios = {
        s.name: s for part in ("main", "heavy") for s, _ in part_scenarios(part, *[seeds] * 3)
    }
    if args.row not in scenarios:
        parser.error(f"no row named {args.row!r}; the rows are:\n  " + "\n  ".join(scenarios))
    print(f"{args.row}, strategy {args.strategy}:\n")
    print("| seed | busiest link | pods placed hot |\n|---|---|---|")
    with multiprocessing.Pool() as pool:  # one process per core
        for seed, top, hot, placed in pool.imap(
            functools.partial(busiest, scenarios[args.row], args.strategy), seeds
        ):
            print(f"| {seed} | {top:.4f} | {hot} of {placed} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
