"""Live data for the whole-system tests: a real Prometheus scraping a live
exporter every second, shared by the modules under tests/e2e."""

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import requests

from harness.exporter import LiveExporter
from harness.prometheus import Device, Exporter, PrometheusServer

EQUAL = [f"n{i:02d}" for i in range(10)]
MIXED_RATES = {"q1": 1e6, "q2": 3e6, "q3": 6e6}  # bytes/s, both directions together


def _exporters() -> list[Exporter]:
    exporters = [
        Exporter(f"10.1.0.{i}:9100", name, [Device("eth0", 5e6, 5e6)])
        for i, name in enumerate(EQUAL)
    ]
    for i, (name, total) in enumerate(MIXED_RATES.items()):
        exporters.append(Exporter(f"10.2.0.{i}:9100", name, [Device("eth0", total / 2, total / 2)]))
    exporters.append(Exporter("10.3.0.1:9100", "t1", [Device("eth0", 0.0, 0.0)]))
    exporters.append(Exporter("10.3.0.2:9100", "gpu-free", [Device("eth0", 0.0, 0.0)]))
    return exporters


@contextmanager
def live_prometheus(exporters: list[Exporter]) -> Iterator[PrometheusServer]:
    """A real Prometheus scraping ``exporters`` live every second, once a
    full 10s window of samples is in."""
    exporter = LiveExporter(exporters)
    server = PrometheusServer(scrape_targets=[exporter.target], scrape_interval="1s")
    server.exporter_target = exporter.target  # type: ignore[attr-defined]  # for a second Prometheus

    # rate() over a window only part-filled with samples under-reads (it
    # divides by the whole window), so let one full 10s window fill first.
    def window_full() -> bool:
        answer = requests.get(
            f"{server.url}/api/v1/query",
            params={"query": "min(count_over_time(node_uname_info[10s])) >= 10"},
            timeout=5,
        ).json()
        return bool(answer["data"]["result"])

    try:
        deadline = time.monotonic() + 60
        while not window_full():
            assert time.monotonic() < deadline, "Prometheus did not collect 10s of samples in 60s"
            time.sleep(0.5)
        yield server
    finally:
        server.stop()
        exporter.stop()


@pytest.fixture(scope="session")
def prometheus():
    with live_prometheus(_exporters()) as server:
        yield server


def node_file(directory, name: str, nodes: list[dict]) -> str:
    path = os.path.join(str(directory), name)
    with open(path, "w") as handle:
        json.dump({"apiVersion": "v1", "kind": "List", "items": nodes}, handle)
    return path


def webhook_config(prometheus_url: str, node_file: str, **extra) -> dict:
    config = {
        "prometheus": {"url": prometheus_url, "window": "10s"},
        "metricsServer": {"enabled": False},
        "nodes": {"file": node_file},
        "refresh": {"interval": "1s", "maxStaleness": "30s"},
        "steering": {"podStartup": "10s"},
    }
    for key, value in extra.items():
        config.setdefault(key, {}).update(value)
    return config
