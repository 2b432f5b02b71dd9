"""`kubectl nettraffic top` wall time for 5,000 nodes from each source,
through the real kubectl binary, Python start-up included.

    python -m bench.top

- ``--source webhook``: kubectl -> plugin -> fake API server's service proxy
  -> the real webhook (gunicorn, TLS) -> its live scoreboard.
- ``--source prometheus``: kubectl -> plugin -> node list from the fake API
  server (real kubernetes client) -> one PromQL query to a real Prometheus ->
  scoring, all in the plugin process.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.fixtures import config, node_list, prometheus_for, write_node_file
from bench.report import bench_parser, write_section
from harness.fakeapi import FakeKubeAPI
from harness.webhook import WebhookProcess

NODES = 5000
RUNS = 7
TARGET = 1.5


def timed(command: list[str], env: dict[str, str], min_lines: int = NODES) -> list[float]:
    """Wall times of RUNS runs; each must succeed and print at least ``min_lines`` lines."""
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        times.append(time.perf_counter() - started)
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("\n") >= min_lines, "every node listed"
    return times


def main(argv: list[str] | None = None) -> int:
    args = bench_parser(__doc__).parse_args(argv)
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl is not on PATH; run through bash .ci/setup", file=sys.stderr)
        return 1
    started = time.time()
    with tempfile.TemporaryDirectory() as directory, prometheus_for(NODES) as prometheus:
        api = FakeKubeAPI()
        for obj in node_list(NODES):
            api.put(obj)
        webhook = WebhookProcess(
            config(prometheus.url, write_node_file(f"{directory}/nodes.json", NODES))
        )
        api.proxy_targets[("nettraffic", "nettraffic")] = webhook.url
        api.proxy_verify = webhook.ca_file
        kubeconfig = api.kubeconfig(f"{directory}/kubeconfig")
        plugin_config = f"{directory}/plugin.yaml"
        with open(plugin_config, "w") as handle:
            handle.write(
                f"prometheus: {{url: '{prometheus.url}', window: 2m, timeout: 10s}}\nmetricsServer: {{enabled: false}}\n"
            )
        env = {
            **os.environ,
            "KUBECONFIG": kubeconfig,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        }
        try:
            results = {
                "webhook": timed([kubectl, "nettraffic", "top", "--source", "webhook"], env),
                "prometheus": timed(
                    [
                        kubectl,
                        "nettraffic",
                        "top",
                        "--source",
                        "prometheus",
                        "--config",
                        plugin_config,
                    ],
                    env,
                ),
            }
            startup = timed([kubectl, "nettraffic", "version"], env, min_lines=1)
        finally:
            webhook.stop()
            api.stop()
    elapsed = time.time() - started
    rows = [
        f"| `--source {name}` | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | "
        f"{'yes' if statistics.median(times) < TARGET else 'no'} |"
        for name, times in results.items()
    ]
    rows.append(
        f"| `kubectl nettraffic version` (start-up alone) | {statistics.median(startup):.2f} s | "
        f"{min(startup):.2f} s | {max(startup):.2f} s | |"
    )
    table = "\n".join(
        [
            f"| command ({NODES:,} nodes, {RUNS} runs) | median | fastest | slowest | under {TARGET} s |",
            "|---|---|---|---|---|",
            *rows,
        ]
    )
    print(table)
    print(f"\n{elapsed:.0f}s")
    if not args.no_write:
        write_section(
            "top",
            "kubectl nettraffic top",
            "python -m bench.top",
            "Wall time of the whole command through the real kubectl, Python start-up included; "
            f"the API server is the fake one over HTTP on 127.0.0.1.\n\n{table}\n\nRun time: {elapsed:.0f} s.",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
