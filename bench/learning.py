"""What learning costs at 500 nodes (15,000 pods) and at 5,000 nodes
(150,000 pods), in Deployments of 10 pods. The learner's one query against a real
Prometheus that scraped cAdvisor- and kube-state-metrics-shaped series for
all of them (from a stand-in exporter on 127.0.0.1), the learner's update
from its answer, and the learned table's memory, in the refresher process
and as sent to the serving process with every refresh; then what the
product's queries (the refresh's node query and the learner's rounds, with
the defaults) cost that Prometheus, minute by minute, and how soon a new
Deployment is learned.

    python -m bench.learning
"""

import os
import pickle
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import NamedTuple

import yaml

from bench.fixtures import exporters as node_exporters
from bench.fixtures import write_node_file
from bench.learning_load import Cluster, LearnerRun, PodSeriesExporter, Refreshes
from bench.report import bench_parser, write_section
from harness.exporter import LiveExporter
from harness.prometheus import PrometheusServer
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.learning import workload_bandwidth
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport, PodTrafficSource
from kubectl_nettraffic.learning.workload_bandwidth import BandwidthLearner, LearnedBandwidth
from kubectl_nettraffic.sources.prometheus import PrometheusSource

SCRAPE = "15s"
MINUTE = 60.0
# The learner's timeout in the benches: the whole-cluster reads they time are
# no round the product makes at 150,000 pods (it slices them), and on a slow
# machine they outlast its 30 s.
WHOLE_READ_TIMEOUT = "120s"
IDLE_MINUTES, NODE_MINUTES = 3, 2
# Live: the first minutes read the first pass and learn the new Deployment;
# the budget is judged over the steady minutes after them.
WARM_MINUTES, STEADY_MINUTES = 2, 10
LEARNING_MINUTES = WARM_MINUTES + STEADY_MINUTES
QUIET_LEARNING_MINUTES = 10
TRACED_FRAMES = 32  # deep enough that every allocation under the learner's calls names its module


# 30 pods a node in both
CLUSTERS = (Cluster(500, 1_500), Cluster(5_000, 15_000))


INTRO = (
    "The learner's queries against a real Prometheus that scraped cAdvisor- and kube-"
    "state-metrics-shaped series for every pod, and node_exporter's for every node, every"
    " 15 s (stand-in exporters in this process, rendering two counters a pod on the same "
    "2 cores, so the times are pessimistic), at 500 nodes and 15,000 pods and at 5,000 "
    "nodes and 150,000 pods, each with a Prometheus of its own. The learner runs on its "
    "own thread in the refresher process, off the admission path and outside the node "
    "refresh; each replica runs both. Live, both run as the refresher process runs them, "
    "with the chart's defaults (its replicas, each with its part of the share), and a new"
    " Deployment starts sending in the second minute. Then scraping stops and the same "
    "queries are evaluated at a moment before it did, so that the Prometheus process's "
    "CPU (read from /proc minute by minute) is theirs: scraping's own load moved it by up"
    " to four points from one minute to the next, more than what is to be measured. Less "
    "the idle minutes' mean, that is what each costs the user's Prometheus; the idle "
    "minutes' spread is the noise of that figure. The learner's budget "
    "(learning.prometheusShare) is query time, wall-clock from sending a query to its parsed "
    "answer, in any minute; Prometheus's CPU per second of query time converts it."
)


def chart_defaults() -> tuple[int, float]:
    """The chart's replicaCount and learning.prometheusShare: each replica
    runs its own refresh and learner, with its part of the share
    (templates/configmap.yaml)."""
    path = os.path.join(os.path.dirname(__file__), "..", "charts", "nettraffic", "values.yaml")
    with open(path) as handle:
        values = yaml.safe_load(handle)
    return int(values["replicaCount"]), float(values["learning"]["prometheusShare"])


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used (Linux: /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_minute(
    pid: int, minutes: int, during: Callable[[int], None] | None = None
) -> list[tuple[float, float]]:
    """(start on the monotonic clock, the Prometheus process's CPU seconds)
    of each of ``minutes`` minutes; ``during(minute)`` is called at the start of each."""
    shares = []
    for minute in range(minutes):
        if during is not None:
            during(minute)
        before, started = process_cpu_seconds(pid), time.monotonic()
        time.sleep(MINUTE - (time.monotonic() - started))
        shares.append((started, process_cpu_seconds(pid) - before))
    return shares


def query_time(
    rounds: list[tuple[str, float, float]], minutes: list[tuple[float, float]]
) -> list[float]:
    """The query time within each minute: what the learner's budget bounds."""
    return [
        sum(max(0.0, min(s + d, m + MINUTE) - max(s, m)) for _, s, d in rounds) for m, _ in minutes
    ]


def worst_sliding_minute(rounds: list[tuple[str, float, float]], start: float, end: float) -> float:
    """The most query time in any 60 s between ``start`` and ``end``: a
    window that holds the most begins where some round begins (or at start)."""
    starts = [start, *(s for _, s, _ in rounds if start <= s <= end - MINUTE)]
    return max(
        sum(max(0.0, min(s + d, t + MINUTE) - max(s, t)) for _, s, d in rounds) for t in starts
    )


def shares(values: list[float]) -> str:
    return ", ".join(f"{v:.1%}" for v in values)


def scraping(targets: dict[str, str], rule_files: Sequence[str] = ()) -> PrometheusServer:
    """A Prometheus scraping each job's target every SCRAPE, evaluating
    ``rule_files``."""
    return PrometheusServer(
        rule_files=rule_files,
        scrape_configs=[
            {
                "job_name": job,
                "honor_labels": True,
                "scrape_interval": SCRAPE,
                "scrape_timeout": SCRAPE,
                "static_configs": [{"targets": [target]}],
            }
            for job, target in targets.items()
        ],
    )


def every_pod_read(source: PodTrafficSource, pods: int, wait: float) -> PodTrafficReport:
    """The learner's samples once every pod has two scrapes in the window
    (rate() needs them), waiting ``wait`` seconds at most."""
    deadline = time.monotonic() + wait
    while True:
        report = source.samples()
        if len(report.samples) == pods or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(report.samples) == pods, len(report.samples)
    return report


class Offline(NamedTuple):
    """What one round costs, timed apart from the live minutes."""

    report: PodTrafficReport
    query_seconds: list[float]
    update_seconds: list[float]
    detailed_seconds: list[float]
    held: int  # bytes the learner's histograms hold
    table: LearnedBandwidth
    wire: int  # bytes of the learned table pickled
    roundtrip: float  # seconds to pickle and load it


def offline(settings: Settings, cluster: Cluster) -> Offline:
    """The learner's query, its update, `top pods`' query, the histograms'
    memory and the learned table's size and round trip."""
    source = PodTrafficSource(PrometheusSource(settings.prometheus), settings.learning)
    report = every_pod_read(source, cluster.pods, 300)
    query_seconds, update_seconds, detailed_seconds = [], [], []
    learner = BandwidthLearner()
    for _ in range(3):
        started = time.perf_counter()
        report = source.samples()
        query_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        learner.observe(report.samples, report.evaluated_at)
        learned = learner.learned(report.evaluated_at)
        update_seconds.append(time.perf_counter() - started)
        time.sleep(1)
    for _ in range(1):
        started = time.perf_counter()
        source.fetch()
        detailed_seconds.append(time.perf_counter() - started)
    # Only what the learner's module allocated: the stand-in exporters render
    # every pod's series in this process too (36 MiB at 150,000 pods), and a
    # render during the measurement counted in it (46.6 MiB against 10.7).
    tracemalloc.start(TRACED_FRAMES)
    fresh = BandwidthLearner()
    for step in range(3):
        fresh.observe(report.samples, report.evaluated_at + step * 15)
    table = fresh.learned(report.evaluated_at + 30)
    learner_only = tracemalloc.Filter(True, workload_bandwidth.__file__, all_frames=True)
    traces = tracemalloc.take_snapshot().filter_traces([learner_only])
    held = sum(stat.size for stat in traces.statistics("filename"))
    tracemalloc.stop()
    wire = len(pickle.dumps(learned, protocol=pickle.HIGHEST_PROTOCOL))
    started = time.perf_counter()
    for _ in range(5):
        pickle.loads(pickle.dumps(learned, protocol=pickle.HIGHEST_PROTOCOL))
    roundtrip = (time.perf_counter() - started) / 5
    return Offline(
        report, query_seconds, update_seconds, detailed_seconds, held, table, wire, roundtrip
    )


class Live(NamedTuple):
    runs: list["LearnerRun"]
    refreshes: list[Refreshes]
    minutes: list[tuple[float, float]]  # cpu_per_minute's


def live(settings: Settings, exporter: "PodSeriesExporter", pid: int, replicas: int) -> Live:
    """Each replica's learner and node refresh as its refresher process
    runs them, a new Deployment added in the second minute."""
    refreshes = [Refreshes(settings) for _ in range(replicas)]
    runs = [
        LearnerRun(
            settings,
            PodTrafficSource(PrometheusSource(settings.prometheus), settings.learning),
            exporter if replica == 0 else None,
        )
        for replica in range(replicas)
    ]

    def every_replica(minute: int) -> None:
        for refresh in refreshes:
            refresh.minute(minute)
        for run in runs:
            run.minute(minute)
            run.added_at = runs[0].added_at  # one new Deployment, for each to learn

    minutes = cpu_per_minute(pid, LEARNING_MINUTES, every_replica)
    for run in runs:
        run.learning.stop()
    for refresh in refreshes:
        refresh.stop()
    return Live(runs, refreshes, minutes)


class Quiet(NamedTuple):
    idle: list[tuple[float, float]]
    nodes_only: list[tuple[float, float]]
    learning: list[tuple[float, float]]
    runs: list["LearnerRun"]


def quiet(
    settings: Settings,
    exporters: tuple["PodSeriesExporter", LiveExporter],
    pid: int,
    replicas: int,
) -> Quiet:
    """Scraping stopped (it moved Prometheus's CPU by up to four points from
    minute to minute, more than the 5% to be measured), the same queries
    evaluated at a moment before it stopped, so that the Prometheus
    process's CPU is theirs: alone, the node queries, the learners."""
    at = time.time() - 1
    for exporter in exporters:
        exporter.stop()
    time.sleep(2 * float(SCRAPE.rstrip("s")))  # the failed scrapes' staleness written
    idle = cpu_per_minute(pid, IDLE_MINUTES)
    quiet_refreshes = [Refreshes(settings, at=lambda: at) for _ in range(replicas)]
    nodes_only = cpu_per_minute(
        pid, NODE_MINUTES, lambda minute: [r.minute(minute) for r in quiet_refreshes]
    )
    for refresh in quiet_refreshes:
        refresh.stop()
    quiet_runs = [
        LearnerRun(
            settings,
            PodTrafficSource(
                PrometheusSource(settings.prometheus, clock=lambda: at), settings.learning
            ),
        )
        for _ in range(replicas)
    ]
    learning = cpu_per_minute(
        pid, QUIET_LEARNING_MINUTES, lambda minute: [r.minute(minute) for r in quiet_runs]
    )
    for run in quiet_runs:
        run.learning.stop()
    return Quiet(idle, nodes_only, learning, quiet_runs)


def measure(cluster: Cluster, replicas: int, share: float) -> list[str]:
    """The table's rows for one cluster size."""
    exporter = PodSeriesExporter(cluster)
    node_exporter = LiveExporter(node_exporters(cluster.nodes))
    prometheus = scraping({"pods": exporter.target, "nodes": node_exporter.target})
    directory = tempfile.TemporaryDirectory()
    try:
        settings = settings_from_mapping(
            {
                "prometheus": {"url": prometheus.url, "window": "1m", "timeout": "60s"},
                "metricsServer": {"enabled": False},
                "nodes": {"file": write_node_file(f"{directory.name}/nodes.json", cluster.nodes)},
                "learning": {"prometheusShare": share / replicas, "timeout": WHOLE_READ_TIMEOUT},
            }
        )
        costs = offline(settings, cluster)
        pid = prometheus.process.pid
        lively = live(settings, exporter, pid, replicas)
        quietly = quiet(settings, (exporter, node_exporter), pid, replicas)
    finally:
        prometheus.stop()
        exporter.stop()
        node_exporter.stop()
        directory.cleanup()
    return rows(cluster, replicas, share, settings, costs, lively, quietly)


def rows(
    cluster: Cluster,
    replicas: int,
    share: float,
    settings: Settings,
    costs: Offline,
    lively: Live,
    quietly: Quiet,
) -> list[str]:
    report, query_seconds, update_seconds, detailed_seconds = costs[:4]
    held, table, wire, roundtrip = costs[4:]
    runs, refreshes, minutes = lively
    idle, nodes_only, learning, quiet_runs = quietly
    idle_shares = [cpu / MINUTE for _, cpu in idle]
    idle_mean = statistics.mean(idle_shares)
    node_extra = [cpu / MINUTE - idle_mean for _, cpu in nodes_only]
    learner_extra = [cpu / MINUTE - idle_mean for _, cpu in learning]
    rounds = [r for run in runs for r in run.rounds]
    queried = query_time(rounds, minutes)
    steady_start = minutes[WARM_MINUTES][0]
    worst = worst_sliding_minute(rounds, steady_start, minutes[-1][0] + MINUTE)
    quiet_queried = query_time([r for run in quiet_runs for r in run.rounds], learning)
    slices = [seconds for kind, _, seconds in rounds if kind == "slice"]
    young = [seconds for kind, _, seconds in rounds if kind == "young"]
    after = [run.learned_after for run in runs]
    learned_after = (
        "not within the run"
        if None in after
        else " and ".join(f"{a:.0f} s" for a in after if a is not None)
    )
    node_queries = [d for refresh in refreshes for _, _, d in refresh.queries]
    budget = share * MINUTE  # every replica's learner together
    return [
        f"| cost at {cluster.nodes:,} nodes, {cluster.pods:,} pods, {cluster.deployments:,} Deployments | figure |",
        "|---|---|",
        f"| the learner's query over every pod at once (joined in Prometheus: {len(report.samples) + cluster.deployments:,} series): evaluation, answer and parsing, median | {statistics.median(query_seconds):.2f} s |",
        f"| `top pods`' query (receive and transmit apart, joined here: {len(report.samples) * 3 + cluster.deployments:,} series), median | {statistics.median(detailed_seconds):.2f} s |",
        f"| the learner's update from it, and its table, median | {statistics.median(update_seconds):.2f} s |",
        f"| the learner's histograms in the refresher process | {held / 2**20:.1f} MiB |",
        f"| the learned table as sent to the serving process after each learning round | {wire / 2**20:.2f} MiB ({len(table.workloads):,} workloads) |",
        f"| pickling and loading it | {roundtrip * 1e3:.0f} ms |",
        f"| live, {LEARNING_MINUTES} minutes, {replicas} replicas (the chart's replicaCount), each with its node refresh every {settings.refresh.interval:g} s and its learner at learning.prometheusShare {share:g} / {replicas}: the learners' rounds | {runs[0].learning.slices} slices; {len(slices)} slice rounds (median {statistics.median(slices) if slices else 0:.2f} s), {len(young)} young rounds (median {statistics.median(young) if young else 0:.2f} s) |",
        f"| ... the learners' query time in each minute, together (their budget: {budget:g} s) | {', '.join(f'{q:.1f}' for q in queried)} s |",
        f"| ... the most of it in any 60 s of the {STEADY_MINUTES} steady minutes (from the {WARM_MINUTES + 1}rd on), sliding | {worst:.1f} s ({worst / budget:.0%} of the budget) |",
        f"| ... the node query ({cluster.nodes:,} nodes), median | {statistics.median(node_queries):.2f} s |",
        f"| ... a new Deployment (10 pods) added in the second minute: learned by each replica after its pods started sending | {learned_after} |",
        f"| scraping stopped, the queries evaluated before it stopped: the Prometheus process's CPU per minute, idle ({IDLE_MINUTES} minutes) | {shares([c / MINUTE for _, c in idle])} of one core |",
        f"| ... the node queries, every {settings.refresh.interval:g} s from each of {replicas} replicas ({NODE_MINUTES} minutes), less idle | {shares(node_extra)} of one core |",
        f"| ... the {replicas} learners ({QUIET_LEARNING_MINUTES} minutes), less idle: each minute | {shares(learner_extra)} of one core |",
        f"| ... the learners' busiest minute, and their mean; the idle minutes' spread beside it | {max(learner_extra):.1%} and {statistics.mean(learner_extra):.1%} of one core; idle {min(idle_shares):.1%} to {max(idle_shares):.1%} |",
        f"| ... its query time in each minute; Prometheus's CPU per second of it | {', '.join(f'{q:.1f}' for q in quiet_queried)} s; {sum(learner_extra) * MINUTE / max(1e-9, sum(quiet_queried)):.2f} |",
    ]


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    replicas, share = chart_defaults()
    tables = []
    for cluster in CLUSTERS:
        tables.append("\n".join(measure(cluster, replicas, share)))
        print(tables[-1], end="\n\n", flush=True)
    body = "\n\n".join(tables)
    if not args.no_write:
        write_section(
            "learning",
            "Learning at scale",
            "python -m bench.learning",
            INTRO + "\n\n" + body,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
