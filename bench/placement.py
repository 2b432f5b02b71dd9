"""Placement quality: does steering keep new pods off saturated NICs?

A simulation driven by the real engine and placement code (Scoreboard,
Steerer: the same objects the webhook runs), with kube-scheduler modelled as
in bench/scheduler_model.py. Run:

    python -m bench.placement              # both parts, each writes its docs/benchmarks.md section
    python -m bench.placement --part main  # the main rows, limits and learning (with the PNGs)
    python -m bench.placement --part heavy # the heavy pods at every delay and replica count (hours)
    python -m bench.placement --quick      # fewer seeds
    python -m bench.placement --seed N     # every row's seeds from N (default: drawn anew)

Model, per seed:
- Nodes with 10 Gbit/s links (or a mix of 1, 10 and 25 Gbit/s), 3 zones,
  16 cores / 64 GiB, skewed background traffic: most nodes lightly loaded,
  10% near saturation (75-95%).
- Workloads scale up in bursts: every 30 s a workload adds 10-40 replicas
  within one second. Each pod sends its own traffic (log-normal, median
  20 MB/s) starting 2-30 s after admission (uniform: image pull and
  start; the product keeps its steering.podStartup default, 10 s) and
  requests 0.5 CPU / 1 GiB.
- Metrics refresh every 15 s from a 2 m rate window, so the data lags.
- Strategies: (a) default scheduler alone; (b) the tutorials' approach:
  prefer the single lowest-traffic node (weight 100), no burst accounting;
  (c) this project with its defaults; (d) an oracle that knows every pod's
  traffic and puts it on the least-utilised link among the nodes it fits on.
- kube-scheduler as bench/scheduler_model.py models it: it scores only a
  sample of the nodes in clusters of 100 nodes or more.
- A placement is "hot" when the node's committed load (background plus every
  pod already placed there, started or not) is above 80% of its link when
  the pod lands: that pod will suffer once everything runs.
"""

import multiprocessing
import os
import sys
import time

import numpy as np

from bench.placement_scenarios import PARTS, Seeds, part_scenarios
from bench.placement_simulation import HOT, STRATEGIES
from bench.placement_tables import LABELS, Rows, Tables, run_scenario, tables
from bench.report import bench_parser, drawn_seed, rerun_command, write_section

MODEL_NOTE = """\
The simulation drives the real engine (Scoreboard, Steerer, the in-flight
bookings: the objects the webhook runs) with metrics refreshed every 15 s from a
2 m rate window. kube-scheduler is modelled as bench/scheduler_model.py
documents, rule by rule from its source: it filters only until it has found
numFeasibleNodesToFind nodes (every node below 100; 230 of 500), starting
where the previous pod stopped, and scores only those; NodeAffinity (2),
PodTopologySpread (2, system default constraints), NodeResourcesFit (1,
LeastAllocated) and NodeResourcesBalancedAllocation (1, the v1.36 rule)
each normalised in integers over the scored nodes; a pod no node has room
for stays Pending; ties are broken at random. The oracle puts each pod on the
least-utilised link among the nodes it fits on. Nodes have 10 Gbit/s links
(three in ten 1 Gbit/s and one in five 25 Gbit/s in the rows that say so); 10%
start at 75-95% utilisation. A pod is placed *hot* when its node's
committed load (background plus every pod already placed there) is above 80%
when it lands. (e) uses the project's defaults: pods carry no
expected-bandwidth annotation, so each is booked at 1Mi/s while it really
sends about 20 MB/s, except in the rows that say otherwise; a pod starts
sending 2-30 s after its admission (uniform), while the product assumes its
steering.podStartup default (10 s); each booking
moves to the node the pod was bound to (steering.followBindings); at every
refresh the webhook's leader assigns traffic tiers (kubectl_nettraffic/scoring/tiers.py,
with its hysteresis) and the labels reach the nodes in node order at
tierLabels.writesPerSecond (20); kube-scheduler's NodeAffinity reads the pod as
patched (its one-node terms, and its tier terms on every node carrying the
label now, sampled or not); each webhook replica refreshes at its own offset; and pods are booked at what the learner (learning.*, on by
default) made of the pods placed so far, once a minute: their rate() over
the window, as cAdvisor would report it, each under its Deployment (in most rows every
burst is a new workload, so pods get the cluster-wide figure). (c) is the
same with steering.trafficTiers off. The model's
limits: filtering walks the nodes in order (the scheduler checks them in
parallel and may examine a few more), no pod count limit, volumes, nominated
nodes or preemption."""

CONTROL_PLANE_NOTE = (
    "bench/control_plane.py, each rule from the component's source: a scale-up's pods "
    "created in the ReplicaSet controller's slow-start batches of 1, 2, 4, 8, ... through "
    "its client's 20 requests/s (burst 30), each create taking about 20 ms; bindings in "
    "creation order, at most 50 a second (kube-scheduler's client), each around the row's "
    "median delay (log-normal, sigma 0.5); every event reaching each watch about 5 ms "
    "later. The scheduler's choice is made in admission order, as its FIFO queue makes "
    "it; a pod starts sending 2-30 s after its admission. The delays are drawn apart "
    "from the admissions: a scenario's rows admit every burst at the same times whatever "
    "the delay and the replicas"
)


def plot(per_strategy: dict[str, np.ndarray], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(STRATEGIES), figsize=(20, 3.6), sharey=True)
    for axis, strategy in zip(axes, STRATEGIES, strict=True):
        values = np.sort(per_strategy[strategy])[::-1] * 100
        colours = ["#d62728" if v > HOT * 100 else "#1f77b4" for v in values]
        axis.bar(range(len(values)), values, color=colours, width=1.0)
        axis.axhline(HOT * 100, color="grey", linestyle="--", linewidth=0.8)
        axis.set_title(LABELS[strategy], fontsize=9)
        axis.set_xlabel("nodes, busiest first")
    axes[0].set_ylabel("link utilisation after placement (%)")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


SPREAD_NOTE = (
    "Each workload's spread at the end of a draw, as its topology spread sees it "
    "(kube-scheduler's default constraints: zone maxSkew 5, hostname maxSkew 3); the "
    "oracle keeps the zone constraint. A draw's spread is kept when no more of its "
    "workloads are past zone skew 5 or miss a zone (those of 3 pods or more) than under "
    "(a) on the same draw, and, in the calm rows, when its mean zone skew and pods of a "
    "workload per node are within 0.5 of (a)'s"
)
GOALS_NOTE = (
    "Against the goals (within 2% of d on max utilisation; at most 0.5% hot "
    "placements or (d)'s share + 0.2 points, whichever is larger; at least 5x fewer than b)"
)


def publish_main(
    written: Tables,
    plots: dict[str, dict[str, np.ndarray]],
    command: str,
    first: int,
    elapsed: float,
) -> None:
    """docs/benchmarks.md's placement section (the main part) and its plots."""
    os.makedirs("docs/img", exist_ok=True)
    images = []
    for name in ("50 nodes", "500 nodes"):
        path = f"docs/img/placement-{name.split()[0]}-nodes.png"
        plot(plots[name], path, f"Link utilisation per node after placement, {name} (last seed)")
        images.append(f"![{name}]({path.removeprefix('docs/')})")
    write_section(
        "placement",
        f"Placement quality (seeds from {first})",
        command,
        f"{MODEL_NOTE}\n\n{written.main}\n\n{GOALS_NOTE}, and the node label writes (e) "
        f"needs:\n\n{written.verdict}\n\n{SPREAD_NOTE}:\n\n{written.spread}\n\n"
        "Returning workloads, with and without learned bandwidth (pods carry no "
        "annotation; a burst is a scale-up of one of the last few Deployments, or, "
        "one time in four, a new one; each pod sends around its Deployment's own mean). "
        "Most rows start with no pod running, so the run's first burst is booked at "
        "steering.defaultPodBandwidth: nothing has been learned yet. The rows 'installed "
        "after 2 bursts' start the webhook in a cluster where two bursts already run (placed "
        "as the oracle would, for every strategy), as when it is installed into a working "
        "cluster. Goals from a workload's second burst on: at most 0.5% hot or (d)'s share "
        "+ 0.2 points, whichever is larger, max utilisation within 2% of the oracle's:"
        f"\n\n{written.learning}\n\n"
        "The heavy pods the webhook knows nothing of yet, with 1, 2 and 3 replicas and "
        "bindings shown late, are the section after (`--part heavy`).\n\n"
        + "\n\n".join(images)
        + f"\n\nRun time: {elapsed:.0f} s.",
    )


def publish_heavy(written: Tables, command: str, first: int, elapsed: float) -> None:
    """docs/benchmarks.md's section of the heavy rows (the heavy part)."""
    write_section(
        "placement_heavy",
        f"Placement quality: heavy pods the webhook knows nothing of yet (seeds from {first})",
        command,
        f"The model of the section before. Each kind of row with every strategy, the first "
        f"time it runs:\n\n{written.main}\n\n{GOALS_NOTE}:\n\n{written.verdict}\n\n"
        f"{SPREAD_NOTE}:\n\n{written.spread}\n\n"
        "Heavy pods (median 100 MB/s) the webhook knows nothing of yet, with 1, 2 and 3 "
        "webhook replicas (admissions spread over them at random; each replica's binding "
        "watch is fed every steered pod's events, stored then bound, and books the others' "
        "pods as it sees them). 'among light pods already learned': four bursts of 20 MB/s "
        "pods run before the install, so the cluster-wide figure pods of a new workload are "
        "booked at is a light pod's; 'empty cluster': no node starts hot; 'installed after 1 "
        "burst': one burst runs before the install, placed as the oracle would. These rows "
        "run 300 seeds: a seed's busiest link moves by several points as one pod of the "
        "lognormal's tail lands on a node or not, so the mean over 100 seeds was up to 0.9 "
        "of a point from the mean over 300. After each figure, ± one standard "
        "error over the seeds, in points (hot share: the seeds' pods placed hot over their "
        "pods placed; busiest link: each seed's less (d)'s on the same seed). A row meets "
        "the goals by its figures: at most 0.5% hot or (d)'s share + 0.2 points, whichever "
        "is larger, and the busiest link within 2 points of (d)'s. With every binding "
        "shown the instant the pod is admitted (pods admitted in slow-start batches as "
        f"below, like every row that names no binding delay):\n\n{written.replicas}\n\n"
        f"The same rows as a control plane shows them ({CONTROL_PLANE_NOTE}), by the median "
        "delay from a pod's admission until the watches show it bound; 'watch delay "
        "measured' is what the steering replicas measured from admission to their watch's "
        "first event of the pod (nettraffic_binding_watch_delay_seconds). Goals up to a "
        f"second; at 2 s the rows are reported only:\n\n{written.delay}\n\n{written.counts}\n\n"
        "Where the goals stop, as scenarios anyone can rerun. First, what no figure per "
        "workload can know: the heavy pods among light ones against an oracle that, like "
        "the webhook at best, knows each pod's workload's mean but not the pod's own "
        f"traffic:\n\n{written.limits}\n\n"
        "Second, what the replicas' window costs: the rows with 2 and 3 replicas at 500 ms "
        "with every other replica's watch shown each pod the instant it is admitted (no "
        f"create call, no watch latency: the limit of any watch):\n\n{written.shown}"
        f"\n\nRun time: {elapsed:.0f} s.",
    )


def run_part(part: str, seeds: tuple[Seeds, Seeds, Seeds], only: str | None) -> Rows:
    """One part's rows, each seed on its own (one process per core)."""
    scenarios = part_scenarios(part, *seeds)
    if only:
        scenarios = [(s, of) for s, of in scenarios if only in s.name]
    rows = Rows()
    started = time.time()
    with multiprocessing.Pool() as pool:
        for number, (scenario, seeds_of) in enumerate(scenarios, 1):
            run_scenario(scenario, seeds_of, rows, pool.imap)
            # A full run takes hours on two cores: say how far it is.
            print(
                f"[{time.time() - started:6.0f} s] {part} {number}/{len(scenarios)} {scenario.name}",
                file=sys.stderr,
                flush=True,
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer seeds (for a smoke run)")
    parser.add_argument(
        "--only",
        metavar="TEXT",
        help="run only the scenarios whose name contains TEXT (prints; writes nothing)",
    )
    parser.add_argument(
        "--part",
        choices=PARTS,
        help="run one part and write its section alone (default: both)",
    )
    parser.add_argument(
        "--seed", type=int, help="the first seed of every row's seeds (default: drawn anew)"
    )
    args = parser.parse_args(argv)
    # Every run draws anew: the clusters, the bursts, their traffic and the
    # scheduler's ties all follow from a row's seeds.
    first = drawn_seed(args.seed)
    seeds = (
        range(first, first + (3 if args.quick else 20)),
        range(first, first + (1 if args.quick else 5)),
        range(first, first + (3 if args.quick else 300)),
    )
    command = rerun_command("bench.placement", argv, args.seed, first)
    for part in [args.part] if args.part else PARTS:
        started = time.time()
        rows = run_part(part, seeds, args.only)
        elapsed = time.time() - started
        written = tables(rows)
        print(written.printed())
        print(f"\n{part}: seeds from {first}, {elapsed:.0f}s")
        if args.no_write or args.only:
            continue
        if part == "main":
            publish_main(written, rows.plots, command, first, elapsed)
        else:
            publish_heavy(written, command, first, elapsed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
