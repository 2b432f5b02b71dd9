"""Large clusters for the benchmarks: a real Prometheus holding node_exporter
history for N nodes (backfilled with promtool), and matching node objects."""

import json
import math
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager

from harness.fakeapi import node
from harness.prometheus import Device, Exporter, PrometheusServer, prometheus_with_history

GBIT = 1.25e8
# The history is backfilled, not live: it runs from 20 minutes before the
# benchmark starts to 15 minutes after, so every query during the run finds
# a full 2m window and fresh node_uname_info samples.
WINDOW = "2m"


def node_names(count: int) -> list[str]:
    return [f"node-{i:05d}" for i in range(count)]


def exporters(count: int, seed: int = 7) -> list[Exporter]:
    rng = random.Random(seed)
    result = []
    for i, name in enumerate(node_names(count)):
        rate = math.exp(rng.gauss(math.log(20e6), 1.0))
        result.append(
            Exporter(
                f"10.{i // 65536}.{i // 256 % 256}.{i % 256}:9100",
                name,
                [
                    Device("eth0", rate * 0.7, rate * 0.3, speed=10 * GBIT),
                    Device("veth0", 1e6, 1e6),
                ],
            )
        )
    return result


def node_list(count: int) -> list[dict]:
    return [
        node(name, ip=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}")
        for i, name in enumerate(node_names(count))
    ]


def write_node_file(path: str, count: int) -> str:
    with open(path, "w") as handle:
        json.dump({"apiVersion": "v1", "kind": "List", "items": node_list(count)}, handle)
    return path


@contextmanager
def prometheus_for(count: int) -> Iterator[PrometheusServer]:
    """Prometheus with history for ``count`` nodes from 20 minutes ago to 15 minutes ahead."""
    started = time.time()
    server = prometheus_with_history(
        exporters(count), end=float(int(time.time()) + 900), duration=2100
    )
    print(f"  (Prometheus with {count} nodes ready in {time.time() - started:.0f}s)", flush=True)
    try:
        yield server
    finally:
        server.stop()


def config(prometheus_url: str, node_file: str, **extra: object) -> dict:
    document: dict = {
        "prometheus": {"url": prometheus_url, "window": WINDOW, "timeout": "10s"},
        "metricsServer": {"enabled": False},
        "nodes": {"file": node_file},
    }
    document.update(extra)
    return document
