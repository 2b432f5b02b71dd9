"""What learning costs at scale: 5,000 nodes and 150,000 pods (15,000
Deployments of 10 pods). The learner's one query against a real
Prometheus that scraped cAdvisor- and kube-state-metrics-shaped series for
all of them (from a stand-in exporter on 127.0.0.1), the learner's update
from its answer, and the learned table's memory, in the refresher process
and as sent to the serving process with every refresh.

    python -m bench.learning
"""

import os
import pickle
import statistics
import threading
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from bench.report import bench_parser, write_section
from harness.exporter import serve_metrics
from harness.prometheus import PrometheusServer
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.learning import BandwidthLearning
from kubectl_nettraffic.sources.pod_traffic import PodTrafficReport, PodTrafficSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.workload_bandwidth import BandwidthLearner

NODES, DEPLOYMENTS, PODS_EACH = 5000, 15000, 10
SCRAPE = "5s"
MINUTE = 60.0


def process_cpu_seconds(pid: int) -> float:
    """User and system CPU a process has used (Linux: /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def paced_prometheus_share(
    pid: int, settings: Settings, source: PodTrafficSource
) -> tuple[float, float]:
    """The learner as the webhook runs it (its thread, pacing itself to
    learning.prometheusShare): the Prometheus process's CPU from the start of
    its first round to the start of its third, less scraping's (measured
    before), as a share of one core; and its pause between rounds."""
    started: list[tuple[float, float]] = []  # (monotonic, Prometheus CPU) at each round
    answered = threading.Semaphore(0)

    def fetch() -> PodTrafficReport:
        started.append((time.monotonic(), process_cpu_seconds(pid)))
        try:
            return source.samples()
        finally:
            answered.release()

    learning = BandwidthLearning(settings, fetch).start()
    try:
        deadline = time.monotonic() + 900
        while len(started) < 3 and time.monotonic() < deadline:
            time.sleep(0.5)
        pause = learning.pause()
    finally:
        learning.stop()
        # The round in flight ends before Prometheus stops (a round only
        # starts while not stopped, so at most this one is left).
        for _ in started:
            answered.acquire(timeout=120)
    if len(started) < 3:
        raise SystemExit("the paced learner did not run three rounds in 15 minutes")
    (t0, cpu0), _, (t2, cpu2) = started[:3]
    return (cpu2 - cpu0) / (t2 - t0), pause


def prometheus_cpu_over_a_minute(
    pid: int, query: "Callable[[], object] | None", interval: float
) -> float:
    """The Prometheus process's CPU seconds over one minute, with ``query``
    run every ``interval`` seconds (as the learner runs it), or none."""
    before, started = process_cpu_seconds(pid), time.monotonic()
    next_query = started
    while time.monotonic() - started < MINUTE:
        if query is not None and time.monotonic() >= next_query:
            query()
            next_query += interval
        time.sleep(0.2)
    return process_cpu_seconds(pid) - before


class PodSeriesExporter:
    """cAdvisor and kube-state-metrics series for every pod, counters growing in real time."""

    def __init__(self, seed: int = 3) -> None:
        rng = np.random.default_rng(seed)
        self.started = time.time()
        names, rates, static = [], [], []
        for d in range(DEPLOYMENTS):
            namespace, deployment = f"ns-{d % 200}", f"app-{d}"
            replicaset = f"{deployment}-5f6a7b"
            static.append(
                f'kube_replicaset_owner{{namespace="{namespace}",replicaset="{replicaset}",'
                f'owner_kind="Deployment",owner_name="{deployment}",owner_is_controller="true"}} 1'
            )
            mean = rng.lognormal(np.log(2e6), 1.0)
            for p in range(PODS_EACH):
                pod = f"{replicaset}-{p:05d}"
                node = f"node-{(d * PODS_EACH + p) % NODES:05d}"
                names.append(
                    f'namespace="{namespace}",pod="{pod}",container="",interface="eth0",node="{node}"'
                )
                rates.append(rng.lognormal(np.log(mean), 0.3))
                static.append(
                    f'kube_pod_owner{{namespace="{namespace}",pod="{pod}",owner_kind="ReplicaSet",'
                    f'owner_name="{replicaset}",owner_is_controller="true"}} 1'
                )
                static.append(
                    f'kube_pod_info{{namespace="{namespace}",pod="{pod}",node="{node}",host_network="false"}} 1'
                )
        self.names, self.rates = names, np.array(rates)
        self.static = "\n".join(static)
        self.server = serve_metrics(self.render)
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def render(self) -> bytes:
        elapsed = time.time() - self.started
        lines = []
        for family, share in (("receive", 0.7), ("transmit", 0.3)):
            totals = 1e9 + self.rates * share * elapsed
            lines.append(f"# TYPE container_network_{family}_bytes_total counter")
            lines.extend(
                f"container_network_{family}_bytes_total{{{n}}} {v:.0f}"
                for n, v in zip(self.names, totals, strict=True)
            )
        return ("\n".join(lines) + "\n" + self.static + "\n").encode()

    def stop(self) -> None:
        self.server.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    exporter = PodSeriesExporter()
    prometheus = PrometheusServer(
        scrape_configs=[
            {
                "job_name": "pods",
                "honor_labels": True,
                "scrape_interval": SCRAPE,
                "scrape_timeout": SCRAPE,
                "static_configs": [{"targets": [exporter.target]}],
            }
        ]
    )
    try:
        settings = settings_from_mapping(
            {"prometheus": {"url": prometheus.url, "window": "1m", "timeout": "60s"}}
        )
        source = PodTrafficSource(PrometheusSource(settings.prometheus), settings.learning)
        deadline = time.monotonic() + 300
        while True:  # two scrapes in the window, for rate()
            report = source.samples()
            if len(report.samples) == DEPLOYMENTS * PODS_EACH or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert len(report.samples) == DEPLOYMENTS * PODS_EACH, len(report.samples)
        query_seconds, update_seconds, detailed_seconds = [], [], []
        learner = BandwidthLearner()
        for _ in range(5):
            started = time.perf_counter()
            report = source.samples()
            query_seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            learner.observe(report.samples, report.evaluated_at)
            learned = learner.learned(report.evaluated_at)
            update_seconds.append(time.perf_counter() - started)
            time.sleep(1)
        for _ in range(3):
            started = time.perf_counter()
            source.fetch()
            detailed_seconds.append(time.perf_counter() - started)
        tracemalloc.start()
        fresh = BandwidthLearner()
        for step in range(3):
            fresh.observe(report.samples, report.evaluated_at + step * 15)
        table = fresh.learned(report.evaluated_at + 30)
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        wire = len(pickle.dumps(learned, protocol=pickle.HIGHEST_PROTOCOL))
        started = time.perf_counter()
        for _ in range(5):
            pickle.loads(pickle.dumps(learned, protocol=pickle.HIGHEST_PROTOCOL))
        roundtrip = (time.perf_counter() - started) / 5
        # What the learner costs the user's Prometheus: its process's CPU over a
        # minute of learning at the default interval, less a minute of scraping alone.
        pid = prometheus.process.pid
        idle_cpu = prometheus_cpu_over_a_minute(pid, None, 0.0)
        interval = settings.learning.interval
        learning_cpu = prometheus_cpu_over_a_minute(pid, source.samples, interval)
        paced_share, paced_pause = paced_prometheus_share(pid, settings, source)
    finally:
        prometheus.stop()
        exporter.stop()
    rows = [
        "| cost at 5,000 nodes, 150,000 pods, 15,000 Deployments | median |",
        "|---|---|",
        f"| the learner's query (joined in Prometheus: {len(report.samples) + DEPLOYMENTS:,} series): evaluation, answer and parsing | {statistics.median(query_seconds):.2f} s |",
        f"| `top pods`' query (receive and transmit apart, joined here: {len(report.samples) * 3 + DEPLOYMENTS:,} series) | {statistics.median(detailed_seconds):.2f} s |",
        f"| the learner's update from it, and its table | {statistics.median(update_seconds):.2f} s |",
        f"| the learner's histograms in the refresher process | {held / 2**20:.1f} MiB |",
        f"| the learned table as sent to the serving process after each learning round | {wire / 2**20:.2f} MiB ({len(table.workloads):,} workloads) |",
        f"| pickling and loading it | {roundtrip * 1e3:.0f} ms |",
        f"| the Prometheus process's CPU over a minute of scraping alone | {idle_cpu / MINUTE:.0%} of one core |",
        f"| ... with the learner's query every {interval:g} s (the default) | {learning_cpu / MINUTE:.0%} of one core |",
        f"| what the learner's query costs the user's Prometheus, back to back | {(learning_cpu - idle_cpu) / MINUTE:.0%} of one core |",
        f"| ... paced as the webhook runs it (learning.prometheusShare 0.05: a round every {paced_pause:.0f} s here) | {paced_share - idle_cpu / MINUTE:.1%} of one core, over two rounds |",
    ]
    body = "\n".join(rows)
    print(body)
    if not args.no_write:
        write_section(
            "learning",
            "Learning at scale",
            "python -m bench.learning",
            "The learner's one query against a real Prometheus that scraped cAdvisor- and "
            "kube-state-metrics-shaped series for 150,000 pods on 5,000 nodes (a stand-in exporter "
            "in this process, rendering 300,000 counters every 5 s on the same 2 cores, so the "
            "times are pessimistic). The learner runs on its own thread in the refresher process, "
            "off the admission path and outside the node refresh. The Prometheus process's CPU "
            "is read from /proc over a minute of scraping alone, then a minute with the "
            "learner's query at its default interval (a query that takes longer than the "
            "interval runs back to back), then over two rounds of the learner paced as the "
            "webhook runs it (learning.prometheusShare); less scraping's share, that is what "
            "learning costs the user's Prometheus.\n\n" + body,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
