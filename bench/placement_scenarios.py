"""The placement benchmark's scenarios: the cluster, the pods and how they
arrive in each row of docs/benchmarks.md's placement tables."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

GBIT = 1.25e8  # bytes/s
LINK = 10 * GBIT  # the usual node's link


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: int
    bursts: int
    burst_sizes: tuple[int, int] = (10, 40)
    pod_median: float = 20e6  # bytes/s
    # Pods annotated with this factor x their true traffic; None: no annotation.
    estimate_factor: float | None = None
    # Pods annotated with their workload's mean traffic (what its pods send on
    # average, not what each sends): the best figure a per-workload learner
    # could reach, for the limit it leaves.
    annotate_workload_mean: bool = False
    hot_fraction: float = 0.10
    # Every node's background utilisation drawn uniform in this range (a calm
    # cluster); None: the skewed default (most light, hot_fraction near full).
    calm: tuple[float, float] | None = None
    preferred_nodes: int = 3  # steering.preferredNodes
    # Link speeds (bytes/s) and the share of nodes with each.
    links: tuple[tuple[float, float], ...] = ((LINK, 1.0),)
    scoring_mode: str = "traffic"  # scoring.mode
    # Returning workloads: bursts are scale-ups of this many Deployments
    # (each with its own mean traffic, its pods of one ReplicaSet), a share
    # of them brand new.
    # None: every burst is a workload of its own.
    workloads: int | None = None
    new_workload_share: float = 0.25
    learning: bool = True  # learning.enabled (the default)
    # Bursts already running when the webhook is installed: placed as the
    # oracle places them for every strategy (so that what the busiest link
    # ends at says what the strategy did after the install, not what the
    # cluster looked like before), running for a whole window by the
    # learner's first round, and left out of every figure but the final
    # utilisation.
    running_bursts: int = 0
    # Webhook replicas, admissions spread over them at random; each books the
    # others' pods as its binding watch sees them (kube/binding_watch.py).
    replicas: int = 1
    # The running bursts' pod median, when it differs from the new pods'.
    running_pod_median: float | None = None
    # Median seconds from a pod's admission until the binding watches show
    # it bound (bench/control_plane.py); 0: at once.
    binding_delay: float = 0.0
    # The rows of heavy pods: the row's kind, without its replicas and delay.
    heavy: str = ""
    # Every other replica's watch shows a pod stored the instant it is
    # admitted (no create call, no watch latency): the limit of any watch.
    shown_at_admission: bool = False


Seeds = Sequence[int]
# The name's ending of a scenario's twin with every pod annotated with its
# workload's mean traffic.
LIMIT_TWIN = ", pods annotated with their workload's mean"
# The name's ending of the rows whose replicas see each pod the instant
# another admits it (Scenario.shown_at_admission).
SHOWN_AT_ADMISSION = ", every replica shown each pod at admission"
# The row whose (d) is also run knowing only each workload's mean.
MEAN_ORACLE_ROW = "50 nodes, heavy new workloads among light pods already learned"
# The calm rows: every link 3-15% busy, workloads of 3-12 pods at about 1 MB/s.
CALM_SUFFIX = ", calm: every link 3-15% busy, workloads of 3-12 pods at 1 MB/s"
# The binding delays of the heavy rows (seconds from admission until the
# watches show the pod bound): at once, then as a control plane shows them.
BINDING_DELAYS = (0.0, 0.15, 0.5, 1.0, 2.0)
# The goals hold up to this delay; beyond it the rows are reported only.
GOAL_DELAY = 1.0


def delay_label(seconds: float) -> str:
    """A binding delay as the tables show it."""
    return (
        "at once"
        if seconds <= 0
        else f"{seconds * 1000:.0f} ms"
        if seconds < 1
        else f"{seconds:g} s"
    )


def delay_name(seconds: float) -> str:
    """A binding delay as a scenario's name ends; nothing for at once."""
    return "" if seconds <= 0 else f", bindings shown after {delay_label(seconds)}"


def calm_scenario(nodes: int, bursts: int) -> Scenario:
    """Every link 3-15% busy, workloads of 3-12 pods at about 1 MB/s: nothing to gain."""
    return Scenario(
        f"{nodes} nodes{CALM_SUFFIX}",
        nodes,
        bursts,
        burst_sizes=(3, 12),
        pod_median=1e6,
        hot_fraction=0.0,
        calm=(0.03, 0.15),
    )


# The benchmark's two parts, each published in a section of its own: the
# main rows, the limits and learning (tens of minutes on two cores); the
# heavy pods the webhook knows nothing of yet, at every binding delay and
# replica count (hours: 300 seeds a row).
PARTS = ("main", "heavy")


def part_scenarios(
    part: str, seeds_small: Seeds, seeds_large: Seeds, seeds_unknown: Seeds
) -> list[tuple[Scenario, Seeds]]:
    """A part's rows, with their seeds. ``seeds_unknown``: for the heavy
    rows, whose busiest link moves by several points from seed to seed (a
    pod of the lognormal's tail lands on a node or not), so that their
    mean needs many more seeds than the others' to hold still."""
    if part == "heavy":
        return heavy_scenarios(seeds_unknown)
    return [
        *main_scenarios(seeds_small, seeds_large),
        *limit_scenarios(seeds_small),
        *learning_scenarios(seeds_small, seeds_large),
    ]


def main_scenarios(seeds_small: Seeds, seeds_large: Seeds) -> list[tuple[Scenario, Seeds]]:
    mixed = ((GBIT, 0.3), (10 * GBIT, 0.5), (25 * GBIT, 0.2))
    return [
        (calm_scenario(50, 12), seeds_small),
        (calm_scenario(500, 40), seeds_large),
        (Scenario("50 nodes", nodes=50, bursts=12), seeds_small),
        (Scenario("500 nodes", nodes=500, bursts=40), seeds_large),
        (Scenario("5,000 nodes", nodes=5000, bursts=40), seeds_large),
        # Light pods, with bindings shown as a control plane shows them.
        (Scenario("50 nodes" + delay_name(0.5), 50, 12, binding_delay=0.5), seeds_small),
        (Scenario("500 nodes" + delay_name(0.5), 500, 40, binding_delay=0.5), seeds_large),
        (Scenario("500 nodes, links of 1, 10 and 25 Gbit/s", 500, 40, links=mixed), seeds_large),
        (
            Scenario(
                "500 nodes, links of 1, 10 and 25 Gbit/s, scoring.mode link-utilization",
                500,
                40,
                links=mixed,
                scoring_mode="link-utilization",
            ),
            seeds_large,
        ),
    ]


def limit_scenarios(seeds_small: Seeds) -> list[tuple[Scenario, Seeds]]:
    return [
        (
            Scenario(
                "50 nodes, pods annotated with their true traffic", 50, 12, estimate_factor=1.0
            ),
            seeds_small,
        ),
        (Scenario("50 nodes, annotation 10x too low", 50, 12, estimate_factor=0.1), seeds_small),
        (Scenario("50 nodes, annotation 10x too high", 50, 12, estimate_factor=10.0), seeds_small),
        (Scenario("50 nodes, bursts of 150-200 pods", 50, 6, burst_sizes=(150, 200)), seeds_small),
        (
            Scenario(
                "50 nodes, bursts of 150-200 pods, preferredNodes 15",
                50,
                6,
                burst_sizes=(150, 200),
                preferred_nodes=15,
            ),
            seeds_small,
        ),
        (Scenario("10 nodes", 10, 6, burst_sizes=(5, 15)), seeds_small),
        (Scenario("50 nodes, heavy pods (median 100 MB/s)", 50, 12, pod_median=100e6), seeds_small),
        (
            Scenario(
                "50 nodes, heavy pods, preferredNodes 15",
                50,
                12,
                pod_median=100e6,
                preferred_nodes=15,
            ),
            seeds_small,
        ),
    ]


def learning_scenarios(seeds_small: Seeds, seeds_large: Seeds) -> list[tuple[Scenario, Seeds]]:
    return (
        [
            (
                Scenario(
                    f"50 nodes, returning workloads, heavy pods (median 100 MB/s){suffix}",
                    50,
                    7,
                    pod_median=100e6,
                    workloads=6,
                    learning=learning,
                ),
                seeds_small,
            )
            for learning, suffix in ((False, ", learning off"), (True, ""))
        ]
        + [
            (
                Scenario(
                    "50 nodes, returning workloads, heavy pods (median 100 MB/s), "
                    f"installed after 2 bursts{suffix}",
                    50,
                    5,
                    pod_median=100e6,
                    workloads=6,
                    learning=learning,
                    running_bursts=2,
                ),
                seeds_small,
            )
            for learning, suffix in ((False, ", learning off"), (True, ""))
        ]
        + [
            (
                Scenario(
                    f"500 nodes, returning workloads (median 20 MB/s){suffix}",
                    500,
                    40,
                    workloads=12,
                    learning=learning,
                ),
                seeds_large,
            )
            for learning, suffix in ((False, ", learning off"), (True, ""))
        ]
    )


# The heavy rows' kinds: pods the webhook knows nothing of yet.
HEAVY_NEW: dict[str, dict[str, Any]] = {
    "heavy new workloads among light pods already learned": dict(
        bursts=12, pod_median=100e6, running_bursts=4, running_pod_median=20e6
    ),
    "heavy new workloads, empty cluster": dict(bursts=12, pod_median=100e6, hot_fraction=0.0),
    "heavy returning workloads": dict(bursts=7, pod_median=100e6, workloads=6),
    # The same two with one burst running when the webhook is installed:
    # what they do once anything at all has been learned (the cold start apart).
    "heavy new workloads, empty cluster, installed after 1 burst": dict(
        bursts=12, pod_median=100e6, hot_fraction=0.0, running_bursts=1
    ),
    "heavy returning workloads, installed after 1 burst": dict(
        bursts=7, pod_median=100e6, workloads=6, running_bursts=1
    ),
}


def heavy_scenarios(seeds_unknown: Seeds) -> list[tuple[Scenario, Seeds]]:
    """Each kind at every binding delay with 1, 2 and 3 replicas; the best
    any per-workload figure can do; and the replicas' limit."""
    # The best any per-workload figure can do in the empty cluster: each pod
    # booked at its workload's mean, from the first burst on (1 replica).
    workload_mean = [
        (
            Scenario(
                f"50 nodes, heavy new workloads, empty cluster{LIMIT_TWIN}",
                50,
                **HEAVY_NEW["heavy new workloads, empty cluster"],
                annotate_workload_mean=True,
                heavy=f"50 nodes, heavy new workloads, empty cluster{LIMIT_TWIN}",
            ),
            seeds_unknown,
        )
    ]
    unknown_scenarios = [
        (
            Scenario(
                f"50 nodes, {name}"
                + (f", {replicas} replicas" if replicas > 1 else "")
                + delay_name(delay),
                50,
                replicas=replicas,
                binding_delay=delay,
                heavy=f"50 nodes, {name}",
                **fields,
            ),
            seeds_unknown,
        )
        for delay in BINDING_DELAYS
        for name, fields in HEAVY_NEW.items()
        for replicas in (1, 2, 3)
    ]
    # The replicas' limit: the rows with 2 and 3 replicas at 500 ms as if
    # every replica saw each pod the instant another admitted it.
    shown = [
        (
            Scenario(
                f"50 nodes, {name}, {replicas} replicas{delay_name(0.5)}{SHOWN_AT_ADMISSION}",
                50,
                replicas=replicas,
                binding_delay=0.5,
                heavy=f"50 nodes, {name}{SHOWN_AT_ADMISSION}",
                shown_at_admission=True,
                **HEAVY_NEW[name],
            ),
            seeds_unknown,
        )
        for name, replicas in (
            ("heavy new workloads, empty cluster", 3),
            ("heavy new workloads, empty cluster, installed after 1 burst", 2),
            ("heavy new workloads, empty cluster, installed after 1 burst", 3),
        )
    ]
    return [*unknown_scenarios, *workload_mean, *shown]
