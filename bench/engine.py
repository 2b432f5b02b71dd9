"""Engine cost: refresh time for 5,000 nodes, what loading a refresh's
outcome costs the serving process, and Prometheus queries per minute against
the tutorials' one-query-per-node-per-pod pattern.

    python -m bench.engine

Both run against a real Prometheus (backfilled node_exporter history). The
query counts are counted by an HTTP proxy in front of it, not computed.
"""

import pickle
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer

import requests

from bench.fixtures import config, prometheus_for, write_node_file
from bench.report import bench_parser, write_section
from harness import QuietHandler
from harness.reviews import pod
from kubectl_nettraffic.config import DEFAULT_DEVICE_EXCLUDE, settings_from_mapping
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.measuring.engine import FileNodes
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.measuring.refresher_process import encode_message
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.scoring.node_scores import score_nodes
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import PrometheusSource


class CountingProxy:
    """Forwards every request to Prometheus and counts the queries."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.queries = 0
        self.lock = threading.Lock()
        local = threading.local()
        proxy = self

        class Handler(QuietHandler):
            def _forward(self) -> None:
                if not hasattr(local, "session"):
                    local.session = requests.Session()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if "/api/v1/query" in self.path:
                    with proxy.lock:
                        proxy.queries += 1
                answer = local.session.request(
                    self.command,
                    proxy.upstream + self.path,
                    data=body,
                    headers={"Content-Type": self.headers.get("Content-Type", "")},
                )
                self.send_response(answer.status_code)
                self.send_header(
                    "Content-Type", answer.headers.get("Content-Type", "application/json")
                )
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def refresh_cost(count: int, repeats: int) -> dict[str, float]:
    with prometheus_for(count) as prometheus, tempfile.TemporaryDirectory() as directory:
        settings = settings_from_mapping(
            config(prometheus.url, write_node_file(f"{directory}/nodes.json", count))
        )
        nodes = FileNodes(settings.nodes.file)
        source = PrometheusSource(settings.prometheus)
        measurer = Measurer(settings, nodes, source, None)
        board = Scoreboard(settings)
        board.record(measurer.measure())  # warm: file read, connection
        totals, queries, scorings = [], [], []
        for _ in range(repeats):
            started = time.perf_counter()
            board.record(measurer.measure())
            totals.append(time.perf_counter() - started)
            started = time.perf_counter()
            report = source.fetch(nodes())
            queries.append(time.perf_counter() - started)
            started = time.perf_counter()
            score_nodes(nodes(), report.by_node, None, settings.scoring, "both", parse_selector(""))
            scorings.append(time.perf_counter() - started)
        assert board.snapshot is not None and len(board.snapshot.candidates) == count
        # The usual message: scores only, the nodes unchanged since the last one.
        outcome = measurer.measure()
        message = encode_message(outcome, board.snapshot.nodes)
        loads = []
        for _ in range(repeats):
            started = time.perf_counter()
            pickle.loads(message)
            loads.append(time.perf_counter() - started)
        return {
            "total": statistics.median(totals),
            "query": statistics.median(queries),
            "scoring": statistics.median(scorings),
            "min": min(totals),
            "load": statistics.median(loads),
            "message": len(message),
        }


def tutorial_scores(session: requests.Session, url: str, instances: list[str]) -> list[float]:
    """The tutorials' scorer: for each candidate node, its own PromQL query."""
    values = []
    for instance in instances:
        selector = f'instance="{instance}",device!~"{DEFAULT_DEVICE_EXCLUDE}"'
        query = (
            f"sum(rate(node_network_receive_bytes_total{{{selector}}}[2m])) + "
            f"sum(rate(node_network_transmit_bytes_total{{{selector}}}[2m]))"
        )
        answer = session.get(f"{url}/api/v1/query", params={"query": query}, timeout=10).json()
        result = answer["data"]["result"]
        values.append(float(result[0]["value"][1]) if result else 0.0)
    return values


def query_counts(nodes: int, pods: int) -> dict[str, float]:
    from bench.fixtures import exporters

    instances = [e.instance for e in exporters(nodes)]
    with prometheus_for(nodes) as prometheus, tempfile.TemporaryDirectory() as directory:
        node_file = write_node_file(f"{directory}/nodes.json", nodes)
        # This project: one minute of operation is 60/15 = 4 refreshes, each one
        # query, while 100 pods are admitted from the snapshots.
        proxy = CountingProxy(prometheus.url)
        settings = settings_from_mapping(config(proxy.url, node_file))
        measurer = Measurer(
            settings, FileNodes(node_file), PrometheusSource(settings.prometheus), None
        )
        serving = serving_parts(settings)
        steerer = serving.steerer
        started = time.perf_counter()
        for refresh in range(4):
            serving.scoreboard.record(measurer.measure())
            for _ in range(pods // 4 + (1 if refresh < pods % 4 else 0)):
                assert steerer.decide(pod(), None, dry_run=False).preferences
        ours_seconds = time.perf_counter() - started
        ours = proxy.queries
        proxy.stop()

        # The tutorials: every pod scores every node with its own query.
        proxy = CountingProxy(prometheus.url)
        started = time.perf_counter()

        def one_pod(_: int) -> None:
            with requests.Session() as session:
                values = tutorial_scores(session, proxy.url, instances)
                assert len(values) == nodes

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(one_pod, range(pods)))
        tutorial_seconds = time.perf_counter() - started
        tutorial = proxy.queries
        proxy.stop()
    return {
        "ours": ours,
        "ours_seconds": ours_seconds,
        "tutorial": tutorial,
        "tutorial_seconds": tutorial_seconds,
    }


LEARNING_NOTE = (
    "The learner's query (every pod's cAdvisor series joined to its workload, once per "
    "learning round in a thread of its own) and the learned table's memory at 5,000 nodes "
    'and 150,000 pods are in "Learning at scale" below (`python -m bench.learning`, '
    "against a Prometheus of its own holding 165,000 pod series)."
)


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    started = time.time()
    rows = []
    for count in (500, 5000):
        cost = refresh_cost(count, repeats=7)
        rows.append(
            f"| {count:,} | {cost['total'] * 1000:.0f} ms | {cost['query'] * 1000:.0f} ms | "
            f"{cost['scoring'] * 1000:.0f} ms | {cost['min'] * 1000:.0f} ms | "
            f"{cost['load'] * 1000:.1f} ms ({cost['message'] / 1000:.0f} kB) |"
        )
    counts = query_counts(nodes=500, pods=100)
    elapsed = time.time() - started
    refresh_table = "\n".join(
        [
            "| nodes | refresh (median of 7) | of which: the one PromQL query + parsing | of which: scoring | fastest | the serving process loading the refresh's message (median of 7) |",
            "|---|---|---|---|---|---|",
            *rows,
        ]
    )
    query_table = "\n".join(
        [
            "| approach | Prometheus queries in one minute with 100 pods over 500 nodes (counted by the proxy) | wall time of that minute's work |",
            "|---|---|---|",
            f"| this project (refresh every 15 s, one query each; pods read the snapshot) | {counts['ours']:,} | {counts['ours_seconds']:.2f} s |",
            f"| tutorials (one query per node for every pod) | {counts['tutorial']:,} | {counts['tutorial_seconds']:.1f} s (4 threads) |",
            f"| ratio | {counts['tutorial'] / counts['ours']:,.0f}x fewer | |",
        ]
    )
    print(refresh_table)
    print()
    print(query_table)
    print(f"\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "engine",
            "Engine cost",
            "python -m bench.engine",
            f"Refresh = node list + one PromQL query for every node + scoring, against a real "
            f"Prometheus holding backfilled node_exporter series (2 devices per node, one excluded). "
            "The refresh runs in the refresher process; the serving process only loads its "
            "outcome (the usual message: scores, the nodes unchanged), under the GIL its "
            "admissions need.\n\n"
            f"{refresh_table}\n\n{query_table}\n\n{LEARNING_NOTE}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
