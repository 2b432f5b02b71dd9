"""Admission latency and throughput through gunicorn over TLS with keep-alive,
for 100 and 5,000 nodes, beside a bare flask app under the same gunicorn and
TLS settings that returns a fixed patch (the ceiling of this stack).

    python -m bench.admission

Load comes from wrk (keep-alive, 2 threads) on the same 2-core machine:
- "paced": 10 connections, each waiting 9 ms after every answer, which offers
  about 1,000 admissions/s while latency stays small (wrk has no open-loop
  mode; the achieved rate is reported);
- "saturation": 16 connections as fast as the server answers.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from bench.fixtures import config, prometheus_for, write_node_file
from bench.report import write_section
from tests.harness.prometheus import free_port
from tests.harness.reviews import pod, review
from tests.harness.webhook import WebhookProcess, make_certs

DURATION = int(os.environ.get("NT_BENCH_SECONDS", "15"))


def wrk_script(directory: str, paced: bool) -> str:
    body_path = os.path.join(directory, "review.json")
    with open(body_path, "w") as handle:
        json.dump(review(pod()), handle)
    script = os.path.join(directory, "paced.lua" if paced else "post.lua")
    with open(script, "w") as handle:
        handle.write(
            f'local f = io.open("{body_path}", "r")\nwrk.body = f:read("*a")\nf:close()\n'
            'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
        )
        if paced:
            handle.write("function delay()\n  return 9\nend\n")
    return script


def _ms(text: str) -> float:
    value, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def run_wrk(url: str, script: str, connections: int) -> dict[str, float]:
    result = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{connections}",
            f"-d{DURATION}s",
            "--latency",
            "-s",
            script,
            url + "/mutate",
        ],
        capture_output=True,
        text=True,
        timeout=DURATION + 60,
    )
    out = result.stdout
    latency = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.MULTILINE))
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    socket_errors = re.search(r"Socket errors: (.*)", out)
    return {
        "p50": _ms(latency["50"]),
        "p99": _ms(latency["99"]),
        "rate": rate,
        "errors": float(errors.group(1)) if errors else 0.0,
        "socket_errors": 1.0 if socket_errors else 0.0,
    }


class BareProcess:
    def __init__(self, config_path: str) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.bare_app",
                "--config",
                config_path,
                "--port",
                str(self.port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import requests

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                requests.get(self.url + "/healthz", verify=False, timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError("bare app did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def measure(count: int, directory: str) -> dict[str, dict[str, dict[str, float]]]:
    import urllib3

    urllib3.disable_warnings()
    results: dict[str, dict[str, dict[str, float]]] = {}
    certs = make_certs(os.path.join(directory, f"tls-{count}"))
    with prometheus_for(count) as prometheus:
        node_file = write_node_file(os.path.join(directory, f"nodes-{count}.json"), count)
        settings = config(prometheus.url, node_file)
        webhook = WebhookProcess(settings, cert_dir=certs)
        try:
            bare = BareProcess(webhook.config_path)
            try:
                for name, url in (("webhook", webhook.url), ("bare", bare.url)):
                    results[name] = {
                        "paced": run_wrk(url, wrk_script(directory, paced=True), 10),
                        "saturation": run_wrk(url, wrk_script(directory, paced=False), 16),
                    }
                    print(f"  {count} nodes, {name}: {results[name]}", flush=True)
            finally:
                bare.stop()
            scores = webhook.session.get(webhook.url + "/scores").json()
            assert len(scores["nodes"]) == count and not scores["stale"]
        finally:
            webhook.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk (or run bash .ci/setup)", file=sys.stderr)
        return 1
    started = time.time()
    rows = []
    per_request = {}
    paced_tail: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as directory:
        for count in (100, 5000):
            results = measure(count, directory)
            for name in ("webhook", "bare"):
                paced, saturated = results[name]["paced"], results[name]["saturation"]
                rows.append(
                    f"| {count:,} | {'webhook (/mutate, real engine)' if name == 'webhook' else 'bare flask app, fixed patch'} | "
                    f"{paced['rate']:.0f}/s | {paced['p50']:.2f} ms | {paced['p99']:.2f} ms | "
                    f"{saturated['rate']:.0f}/s | {saturated['p50']:.2f} ms | {saturated['p99']:.2f} ms | "
                    f"{int(paced['errors'] + saturated['errors'])} |"
                )
            per_request[count] = (
                results["webhook"]["saturation"]["rate"],
                results["bare"]["saturation"]["rate"],
            )
            paced_tail[count] = results["webhook"]["paced"]["p99"]
    elapsed = time.time() - started
    table = "\n".join(
        [
            "| nodes | server | paced: achieved rate | paced p50 | paced p99 | saturation throughput | saturation p50 | saturation p99 | non-2xx |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    small, large = per_request[100], per_request[5000]
    paced_p99 = paced_tail
    checks = [
        (
            "p99 at about 1,000 admissions/s offered, 100 nodes",
            f"{paced_p99[100]:.2f} ms",
            "<= 5 ms",
            paced_p99[100] <= 5,
        ),
        (
            "p99 at about 1,000 admissions/s offered, 5,000 nodes",
            f"{paced_p99[5000]:.2f} ms",
            "<= 5 ms",
            paced_p99[5000] <= 5,
        ),
        (
            "saturation throughput, webhook / bare app, 100 nodes",
            f"{small[0] / small[1]:.0%}",
            ">= 80%",
            small[0] / small[1] >= 0.8,
        ),
        (
            "saturation throughput, webhook / bare app, 5,000 nodes",
            f"{large[0] / large[1]:.0%}",
            ">= 80%",
            large[0] / large[1] >= 0.8,
        ),
        (
            "per-request cost at 5,000 nodes / at 100 nodes (inverse saturation throughput)",
            f"{small[0] / large[0]:.2f}x",
            "<= 1.2x",
            small[0] / large[0] <= 1.2,
        ),
    ]
    ratios = "\n".join(
        [
            "| check | measured | target | met |",
            "|---|---|---|---|",
            *(
                f"| {name} | {value} | {target} | {'yes' if ok else 'no'} |"
                for name, value, target, ok in checks
            ),
        ]
    )
    print(table)
    print()
    print(ratios)
    print(f"\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "admission",
            "Admission latency and throughput",
            "python -m bench.admission",
            f"wrk on the same 2-core machine as the server, over TLS with keep-alive, "
            f"{DURATION} s per run; both servers run one gunicorn gthread worker with 8 threads "
            f"and the same ssl_context hook.\n\n{table}\n\n{ratios}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
