"""What learning who talks to whom costs at 5,000 nodes and 150,000 pods
(15,000 Deployments of 10 pods, each calling two others: 30,000 pairs,
reported by both ends over TCP as Istio's proxies do): the flow query, the
node read the learner's query gains with a flow source, the conversations
table as sent to the serving process, and the learner with both live,
on its schedule, against its budget (learning.prometheusShare). The
learner's flow read (every pair, whole, where they are within the cap's
bound; else cut in Prometheus to each end's busiest) and the cut it falls
back to are timed beside the same pairs read whole and cut here; with
--flows-only, from the pairs' recording rule (peers.recordingRule) too,
the rule evaluated once a minute.

    python -m bench.peer_learning
    python -m bench.peer_learning --flows-only   # the flow reads alone, a few minutes
    python -m bench.peer_learning --flows-only --bytes-each-way   # the same, peers.bytesEachWay
"""

import pickle
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np
import requests
import yaml

from bench.fixtures import write_node_file
from bench.learning import (
    MINUTE,
    WHOLE_READ_TIMEOUT,
    chart_defaults,
    every_pod_read,
    scraping,
    worst_sliding_minute,
)
from bench.learning_load import Cluster, LearnerRun, PodSeriesExporter
from bench.peer_flow_reads import flow_reads, flow_settings
from bench.report import bench_parser, write_section
from harness.exporter import serve_metrics
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.conversations import PodPlaces, conversations_of
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.peer_traffic import (
    PAIRS_RULE,
    PeerReport,
    PeerTrafficSource,
    pair_rates,
)
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.units import promql_duration

CLUSTER = Cluster(5000, 15_000)
CALLS_EACH = 2
LIVE_MINUTES = 60  # the first pass over 150,000 pods at this budget takes about 45 (28 slices); the pairs come after it
WARM_MINUTES = 2  # the first pass's first rounds
REPEATS = 3
T = TypeVar("T")


class FlowExporter:
    """Istio's TCP byte counters for every pair, as both ends' proxies
    report them (istio/proxy istio_stats.cc names), growing in real time."""

    def __init__(self, deployments: int, seed: int = 5) -> None:
        rng = np.random.default_rng(seed)
        self.started = time.time()
        names, rates = [], []
        for caller in range(deployments):
            callees = rng.choice(deployments - 1, size=CALLS_EACH, replace=False)
            for callee in callees:
                callee = int(callee) + (callee >= caller)
                for reporter in ("source", "destination"):
                    names.append(
                        f'reporter="{reporter}",source_workload="app-{caller}",'
                        f'source_workload_namespace="ns-{caller % 200}",'
                        f'destination_workload="app-{callee}",'
                        f'destination_workload_namespace="ns-{callee % 200}",'
                        f'destination_service="app-{callee}.ns-{callee % 200}.svc.cluster.local",'
                        f'connection_security_policy="mutual_tls",request_protocol="tcp"'
                    )
                    rates.append(0.0)
                rate = float(rng.lognormal(np.log(1e6), 1.0))
                rates[-2:] = [rate, rate]
        self.pairs = deployments * CALLS_EACH
        self.names, self.rates = names, np.array(rates)
        self.server = serve_metrics(self.render)
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def render(self) -> bytes:
        elapsed = time.time() - self.started
        lines = []
        for family, share in (
            ("istio_tcp_sent_bytes_total", 0.8),
            ("istio_tcp_received_bytes_total", 0.2),
        ):
            totals = 1e9 + self.rates * share * elapsed
            lines.append(f"# TYPE {family} counter")
            lines.extend(
                f"{family}{{{n}}} {v:.0f}" for n, v in zip(self.names, totals, strict=True)
            )
        return ("\n".join(lines) + "\n").encode()

    def stop(self) -> None:
        self.server.shutdown()


class TimedPeers:
    """The learner's flow reader, each read's start and time recorded."""

    def __init__(self, source: PeerTrafficSource, rounds: list[tuple[str, float, float]]) -> None:
        self.source, self.rounds = source, rounds
        self.first_at: float | None = None

    def read(
        self, known: Iterable[Workload], at: float, waypoints: frozenset[tuple[str, str]]
    ) -> PeerReport | None:
        started = time.monotonic()
        try:
            return self.source.read(known, at, waypoints)
        finally:
            self.rounds.append(("peers", started, time.monotonic() - started))
            if self.first_at is None:
                self.first_at = time.monotonic()


def median_seconds(call: Callable[[], T]) -> tuple[float, T]:
    """The median time of REPEATS calls, and the last call's result."""
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def measure() -> list[str]:
    replicas, share = chart_defaults()
    pods = PodSeriesExporter(CLUSTER)
    flows = FlowExporter(CLUSTER.deployments)
    prometheus = scraping({"pods": pods.target, "flows": flows.target})
    directory = tempfile.TemporaryDirectory()
    try:
        settings = settings_from_mapping(
            {
                "prometheus": {"url": prometheus.url, "window": "1m", "timeout": "60s"},
                "metricsServer": {"enabled": False},
                "nodes": {"file": write_node_file(f"{directory.name}/nodes.json", CLUSTER.nodes)},
                "learning": {"prometheusShare": share / replicas, "timeout": WHOLE_READ_TIMEOUT},
                "peers": {"source": "istio"},
            }
        )
        plain = PodTrafficSource(PrometheusSource(settings.prometheus), settings.learning)
        joined = PodTrafficSource(
            PrometheusSource(settings.prometheus), settings.learning, with_nodes=True
        )
        flow_source = PeerTrafficSource(PrometheusSource(settings.prometheus), settings.peers)
        every_pod_read(joined, CLUSTER.pods, 600)
        plain_seconds, _ = median_seconds(plain.samples)
        joined_seconds, report = median_seconds(joined.samples)
        known = {s.workload for s in report.samples if s.workload is not None}
        at = time.time()
        flow_seconds, pairs = median_seconds(lambda: flow_source.read(known, at))
        assert isinstance(pairs, PeerReport)
        places = PodPlaces()
        places.record(report.samples)
        started = time.perf_counter()
        conversations = conversations_of(pairs, places, at)
        table_seconds = time.perf_counter() - started
        wire = len(pickle.dumps(conversations, protocol=pickle.HIGHEST_PROTOCOL))
        started = time.perf_counter()
        for _ in range(5):
            pickle.loads(pickle.dumps(conversations, protocol=pickle.HIGHEST_PROTOCOL))
        roundtrip = (time.perf_counter() - started) / 5
        with_node = sum(1 for s in report.samples if s.node)
        cut_rows = flow_reads(prometheus.url, known)
        # Live: the learner as the refresher process runs it, with its flow reader.
        run = LearnerRun(settings, joined)
        timed = TimedPeers(flow_source, run.rounds)
        run.learning = BandwidthLearning(settings, run, peers=timed)
        start = time.monotonic()
        run.minute(0)
        time.sleep(LIVE_MINUTES * MINUTE)
        run.learning.stop()
        end = time.monotonic()
        budget = settings.learning.prometheus_share * MINUTE
        steady = start + WARM_MINUTES * MINUTE
        worst = worst_sliding_minute(run.rounds, steady, end)
        steady_spent = sum(max(0.0, min(s + d, end) - max(s, steady)) for _, s, d in run.rounds)
        flow_rounds = [d for kind, _, d in run.rounds if kind == "peers"]
        live_rounds = ", ".join(
            _rounds_of(run.rounds, kind) for kind in ("slice", "young", "peers")
        )
        slices = run.learning.slices
        learned = run.learning.latest()
        live_conversations = learned.conversations if learned else None
    finally:
        prometheus.stop()
        pods.stop()
        flows.stop()
        directory.cleanup()
    first = "-" if timed.first_at is None else f"{timed.first_at - start:.0f} s"
    average = steady_spent / ((end - steady) / MINUTE)
    within = "yes" if flow_rounds and average <= budget else "**no**"
    # What any schedule needs for the pairs: every pod read (whole: a
    # slice's own overhead left out) and the flow read, at the whole
    # budget; past the live run's length, no pass can end within it.
    least = joined_seconds + flow_seconds
    reach = least / budget
    return [
        f"| the learner's query over every pod, without the pods' nodes (no flow source), median of {REPEATS} | {plain_seconds:.2f} s |",
        f"| ... with each pod's node from kube_pod_info (a flow source set), median | {joined_seconds:.2f} s ({joined_seconds / plain_seconds:.2f}x); {with_node:,} of {CLUSTER.pods:,} pods with a node |",
        f"| the flow query: {flows.pairs:,} pairs, 4 series each (TCP sent and received, both reporters), one reporter read; query, answer and matching, median | {flow_seconds:.2f} s; {sum(len(p) for p in pairs.peers.values()) // 2:,} pairs matched, {sum(pairs.ignored.values())} series left out |",
        *cut_rows,
        f"| the conversations table from the pairs and the pods' nodes | {table_seconds:.2f} s |",
        f"| ... as sent to the serving process with the learned figures; pickling and loading it | {wire / 2**20:.1f} MiB; {roundtrip * 1000:.0f} ms |",
        f"| live, {LIVE_MINUTES} minutes, one replica at learning.prometheusShare {share:g} / {replicas} ({budget:.2f} s of query time a minute): slice rounds, young rounds, flow reads (median; all) | {live_rounds}; the first pairs after {first} |",
        f"| ... its query time a minute from the {WARM_MINUTES + 1}rd minute on, on average, and the most in any 60 s of them (a round over a minute's budget runs alone, then the schedule waits) | {average:.2f} s ({average / budget:.0%} of the budget); {worst:.2f} s ({worst / budget:.0%}) |",
        f"| ... a pass's query time at the least (every pod read whole with its node, then the flow read), and what it takes of the budget; slices a pass | {least:.1f} s; {reach:.0f} minutes ({'within' if reach <= LIVE_MINUTES else 'past'} the live run's {LIVE_MINUTES}); {slices} |",
        f"| goal: the pairs learned, within learning.prometheusShare on average (a flow read done, and the steady minutes' mean at most the budget) | {within} |",
        f"| ... workloads with peers in the published table | {0 if live_conversations is None else len(live_conversations.peers):,} |",
    ]


def _rounds_of(rounds: list[tuple[str, float, float]], kind: str) -> str:
    """How many rounds of ``kind``, their median and their total query time."""
    seconds = [d for k, _, d in rounds if k == kind]
    median = statistics.median(seconds) if seconds else 0.0
    return f"{len(seconds)} ({median:.2f} s; {sum(seconds):.1f} s)"


def _rule_file(directory: str, each_way: bool) -> str:
    """The pairs' recording rule as the chart writes it (pair_rates; the
    chart's own template is held equal to it by tests/test_chart.py), at
    the chart's interval."""
    peers = flow_settings("http://unused", recorded=True, each_way=each_way).peers
    expression = pair_rates(peers, 60.0)
    group = {
        "name": "nettraffic-pairs",
        "interval": promql_duration(peers.recording_rule.interval),
        "rules": [{"record": PAIRS_RULE, "expr": expression}],
    }
    path = f"{directory}/rules.yaml"
    with open(path, "w") as handle:
        yaml.safe_dump({"groups": [group]}, handle)
    return path


def _rule_seconds(prometheus_url: str) -> float:
    """The pairs' rule's last evaluation time, as Prometheus reports it."""
    answer = requests.get(f"{prometheus_url}/api/v1/rules", timeout=10).json()
    (group,) = answer["data"]["groups"]
    return float(group["evaluationTime"])


def measure_flows(each_way: bool) -> list[str]:
    """The flow reads alone: the flow exporter scraped, every workload known,
    the pairs' recording rule evaluated once a minute; ``each_way``: with
    peers.bytesEachWay."""
    flows = FlowExporter(CLUSTER.deployments)
    directory = tempfile.TemporaryDirectory()
    prometheus = scraping({"flows": flows.target}, [_rule_file(directory.name, each_way)])
    try:
        known = {
            Workload(f"ns-{i % 200}", "Deployment", f"app-{i}") for i in range(CLUSTER.deployments)
        }
        whole = pair_rates(flow_settings(prometheus.url, each_way=each_way).peers, 60.0)
        assert whole is not None
        deadline = time.monotonic() + 600
        source = PrometheusSource(flow_settings(prometheus.url).prometheus)
        while time.monotonic() < deadline and (
            len(source.query_vector(whole)) < flows.pairs
            or len(source.query_vector(PAIRS_RULE)) < flows.pairs
        ):
            time.sleep(5)  # two scrapes of every series for rate(), then an evaluation
        before = _rule_seconds(prometheus.url)
        rows = flow_reads(prometheus.url, known, rule=True, each_way=each_way)
        after = _rule_seconds(prometheus.url)
    finally:
        prometheus.stop()
        flows.stop()
        directory.cleanup()
    rows.append(
        "| the recording rule's evaluation, once a minute (Prometheus's /api/v1/rules "
        f"evaluationTime, before and after the reads) | {before:.2f} s, {after:.2f} s |"
    )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument(
        "--flows-only", action="store_true", help="the flow reads alone (own section)"
    )
    parser.add_argument(
        "--bytes-each-way",
        action="store_true",
        help="with --flows-only: with peers.bytesEachWay (own section)",
    )
    args = parser.parse_args(argv)
    started = time.time()
    rows = measure_flows(args.bytes_each_way) if args.flows_only else measure()
    elapsed = time.time() - started
    table = "\n".join(
        [
            f"| at {CLUSTER.nodes:,} nodes, {CLUSTER.pods:,} pods, {CLUSTER.deployments:,} Deployments | figure |",
            "|---|---|",
            *rows,
        ]
    )
    print(table)
    print(f"\n{elapsed:.0f}s")
    if args.no_write:
        return 0
    if args.flows_only:
        each_way = args.bytes_each_way
        write_section(
            "peer_flows_each_way" if each_way else "peer_flows",
            "Reading the pairs at scale" + (", bytes each way" if each_way else ""),
            "python -m bench.peer_learning --flows-only"
            + (" --bytes-each-way" if each_way else ""),
            f"A real Prometheus scraping Istio's TCP byte counters for {CLUSTER.deployments * CALLS_EACH:,} "
            "pairs, both reporters (a stand-in exporter in this process, on the same 2 cores); "
            "the learner's flow read as it runs (every pair where they are within the cap's "
            "bound, else cut in Prometheus) and the cut it falls back to, beside the same pairs "
            "read whole and cut in Python, in one run"
            + (
                " (peers.bytesEachWay: a series per way, both of a pair's ways kept)."
                if each_way
                else "."
            )
            + f"\n\n{table}\n\nRun time: {elapsed:.0f} s.",
        )
        return 0
    write_section(
        "peer_learning",
        "Learning who talks to whom at scale",
        "python -m bench.peer_learning",
        "A real Prometheus scraping, every 15 s, cAdvisor- and kube-state-metrics-shaped "
        "series for every pod and Istio's TCP byte counters for every pair (stand-in "
        "exporters in this process, on the same 2 cores). The learner's budget is query "
        "time, wall-clock, in any minute; the flow query is a round of its own after the "
        "last slice of each pass, paced with the slices (a round over their part runs "
        "alone, and the next waits what it took beyond it)."
        f"\n\n{table}\n\nRun time: {elapsed:.0f} s.",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
