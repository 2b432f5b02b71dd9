"""Admissions while clients misbehave: 50 connections that never send, stall
their TLS handshake half-way, or trickle their request's headers or body in
a byte a second (harness.slow_clients, reopened as the server closes
them), beside a well-behaved load.

    python -m bench.misbehaving_clients

Servers: the webhook as shipped (webhook.front's worker), and the same
webhook under gunicorn's stock gthread worker (bench.stock_worker), both with
the default 4 threads and server.requestTimeout, 100 nodes.

The well-behaved load is bench.admission's paced one: wrk, 10 keep-alive
connections, each waiting 9 ms after every answer (about 1,000 admissions/s
offered), with wrk's timeout at 2 s (the chart's timeoutSeconds: an answer
later than that is one the API server gave up on). Beside it, 20 admissions
each on a new TLS connection, as an API server opens them, timed from
connect to answer. Each server runs the load with and without the
misbehaving clients, several rounds, the order swapped every round;
latencies pool every request of every round.
"""

import math
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

import requests

from bench.admission_servers import ServerProcess
from bench.fixtures import config, prometheus_for, write_node_file
from bench.report import bench_parser, write_section
from bench.wrk import percentile_ms, run_wrk, wrk_missing, wrk_script
from harness.reviews import pod, review
from harness.slow_clients import SlowClients
from harness.webhook import WebhookProcess, make_certs
from kubectl_nettraffic.config import ServerSettings

DURATION = int(os.environ.get("NT_BENCH_SECONDS", "12"))
ROUNDS = int(os.environ.get("NT_BENCH_ROUNDS", "3"))
MISBEHAVING = {"idle": 12, "handshake": 13, "headers": 12, "body": 13}  # 50 connections
PACED_CONNECTIONS = 10
FRESH_ADMISSIONS = 20
ANSWER_WITHIN = 2.0  # seconds: the chart's timeoutSeconds
SERVERS = ("webhook", "stock gthread")
CONDITIONS = ("quiet", "50 misbehaving")


@dataclass
class Pooled:
    rates: list[float] = field(default_factory=list)
    latency_us: Counter[int] = field(default_factory=Counter)
    timeouts: int = 0  # wrk's requests not answered within ANSWER_WITHIN, or failed
    fresh_seconds: list[float] = field(default_factory=list)  # new-connection admissions
    fresh_failed: int = 0


def run_paced(url: str, script: str, histogram: str, pooled: Pooled) -> None:
    run = run_wrk(
        url, script, PACED_CONNECTIONS, histogram, duration=DURATION, timeout=ANSWER_WITHIN
    )
    pooled.rates.append(run.rate)
    pooled.timeouts += run.unanswered
    pooled.latency_us.update(run.latency_us)


def run_fresh(url: str, ca_file: str, pooled: Pooled) -> None:
    for i in range(FRESH_ADMISSIONS):
        session = requests.Session()
        session.verify, session.trust_env = ca_file, False
        started = time.monotonic()
        try:
            answer = session.post(
                url + "/mutate", json=review(pod(f"fresh-{i}-")), timeout=ANSWER_WITHIN
            )
            answer.raise_for_status()
            pooled.fresh_seconds.append(time.monotonic() - started)
        except requests.RequestException:
            pooled.fresh_failed += 1
        finally:
            session.close()


def measure(directory: str) -> tuple[dict[tuple[str, str], Pooled], list[float]]:
    import urllib3

    urllib3.disable_warnings()
    pooled = {(server, condition): Pooled() for server in SERVERS for condition in CONDITIONS}
    longest_open: list[float] = []  # per round: the longest a misbehaving connection stayed open
    certs = make_certs(os.path.join(directory, "tls"))
    script = wrk_script(directory, True, review(pod()), "review")
    histogram = os.path.join(directory, "histogram.txt")
    with prometheus_for(100) as prometheus:
        node_file = write_node_file(os.path.join(directory, "nodes.json"), 100)
        webhook = WebhookProcess(config(prometheus.url, node_file), cert_dir=certs)
        stock = ServerProcess(webhook.config_path, module="bench.stock_worker")
        ports = {"webhook": webhook.port, "stock gthread": stock.port}
        urls = {"webhook": webhook.url, "stock gthread": stock.url}
        try:
            for round_number in range(ROUNDS):
                order = SERVERS if round_number % 2 == 0 else SERVERS[::-1]
                for server in order:
                    for condition in CONDITIONS:
                        result = pooled[server, condition]
                        clients = None
                        if condition != "quiet":
                            clients = SlowClients(
                                ports[server],
                                MISBEHAVING,
                                interval=1.0,
                                duration=DURATION + 30,
                                reconnect=True,
                                handshake_timeout=0.5,
                            )
                            time.sleep(1.0)
                        try:
                            run_paced(urls[server], script, histogram, result)
                            run_fresh(urls[server], webhook.ca_file, result)
                            held = clients.open_count() if clients else 0
                        finally:
                            if clients:
                                clients.stop()
                        if clients and server == "webhook":
                            longest_open.append(clients.longest_open())
                        print(
                            f"  round {round_number + 1}, {server}, {condition}: "
                            f"{result.rates[-1]:.0f}/s, wrk timeouts so far {result.timeouts}, "
                            f"misbehaving open at the end {held}",
                            flush=True,
                        )
        finally:
            stock.stop()
            webhook.stop()
    return pooled, longest_open


def _ms(seconds: float) -> str:
    return "none answered" if math.isnan(seconds) else f"{seconds * 1000:.1f} ms"


def _seconds(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else math.nan


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    if wrk_missing():
        return 1
    started = time.time()
    with tempfile.TemporaryDirectory() as directory:
        pooled, longest_open = measure(directory)
    elapsed = time.time() - started
    rows = []
    for server in SERVERS:
        for condition in CONDITIONS:
            result = pooled[server, condition]
            answered = sum(result.latency_us.values())
            slowest = max(result.latency_us, default=math.nan) / 1e6
            # wrk reports no timeouts when no request ever completes.
            unanswered = str(result.timeouts) if answered else "all"
            rows.append(
                f"| {server} | {condition} | {sorted(result.rates)[len(result.rates) // 2]:.0f}/s | "
                f"{_ms(percentile_ms(result.latency_us, 0.5) / 1000)} | "
                f"{_ms(percentile_ms(result.latency_us, 0.99) / 1000)} | "
                f"{_ms(slowest)} | {answered} | {unanswered} | "
                f"{_ms(_seconds(result.fresh_seconds, 0.99))} | "
                f"{result.fresh_failed} of {FRESH_ADMISSIONS * ROUNDS} |"
            )
    table = "\n".join(
        [
            "| server | clients beside the load | paced: achieved rate | p50 | p99 | slowest answer | answered | not answered within 2 s | new connection each: p99 | new connection each: not answered within 2 s |",
            "|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    quiet, attacked = pooled["webhook", "quiet"], pooled["webhook", "50 misbehaving"]
    p99_ratio = percentile_ms(attacked.latency_us, 0.99) / percentile_ms(quiet.latency_us, 0.99)
    slowest = max(max(attacked.latency_us, default=0) / 1e6, *attacked.fresh_seconds)
    timeout = ServerSettings().request_timeout
    checks = [
        (
            "webhook, 50 misbehaving: every admission answered within 2 s",
            f"slowest {slowest * 1000:.0f} ms; {attacked.timeouts + attacked.fresh_failed} not answered",
            attacked.timeouts == 0 and attacked.fresh_failed == 0 and slowest < ANSWER_WITHIN,
        ),
        (
            "webhook, paced p99 with 50 misbehaving / without (<= 2x)",
            f"{p99_ratio:.2f}x",
            p99_ratio <= 2.0,
        ),
        (
            f"webhook: no misbehaving connection open longer than requestTimeout ({timeout:g} s) + 1 s",
            f"longest {max(longest_open):.1f} s",
            max(longest_open) <= timeout + 1.0,
        ),
    ]
    checks_table = "\n".join(
        [
            "| check | measured | met |",
            "|---|---|---|",
            *(f"| {name} | {value} | {'yes' if ok else 'no'} |" for name, value, ok in checks),
        ]
    )
    print(table)
    print()
    print(checks_table)
    print(f"\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "misbehaving-clients",
            "Admissions while clients misbehave",
            "python -m bench.misbehaving_clients",
            "wrk's paced load (10 keep-alive connections, 9 ms between answers: about "
            "1,000 admissions/s offered, 2 s timeout) and 20 admissions each on a new TLS "
            "connection, with and without 50 misbehaving connections beside them: 12 that "
            "never send, 13 that stall their TLS handshake half-way, 12 that trickle their "
            "header section and 13 their body in at a byte a second, each reopened when the "
            f"server closes it. {ROUNDS} rounds of {DURATION} s per server and condition, 100 "
            f"nodes, {ServerSettings().threads} threads, requestTimeout {timeout:g} s. "
            "'stock gthread' is the same webhook under gunicorn's own gthread worker, for "
            f"comparison.\n\n{table}\n\n{checks_table}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
