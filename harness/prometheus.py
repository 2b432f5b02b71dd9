"""A real Prometheus server on 127.0.0.1, fed with node_exporter-shaped data.

Two ways to feed it, both real Prometheus code paths:
- ``write_blocks``: history written with ``promtool tsdb create-blocks-from
  openmetrics`` before the server starts (exact, repeatable rates);
- ``scrape_config``: the server scrapes a live exporter (the demo).
"""

import math
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import requests
import yaml

from harness import stop_process

STEP = 15.0  # seconds between samples, the usual scrape interval


@dataclass(frozen=True)
class Device:
    name: str
    rx: float  # bytes/s
    tx: float  # bytes/s
    speed: float | None = None  # node_network_speed_bytes; None = series absent
    reset_at: float | None = None  # restarts at 0 just after the sample this long before the end


@dataclass(frozen=True)
class Exporter:
    instance: str
    nodename: str | None  # None: no node_uname_info series
    devices: Sequence[Device]
    job: str = "node-exporter"
    extra_labels: dict[str, str] = field(default_factory=dict)
    non_finite: bool = False  # write NaN as the last receive sample


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def _series_lines(exporters: Sequence[Exporter], end: float, duration: float) -> Iterator[str]:
    times = [end - duration + i * STEP for i in range(int(duration // STEP) + 1)]
    counters = (("node_network_receive_bytes", "rx"), ("node_network_transmit_bytes", "tx"))
    for family, attribute in counters:
        yield f"# TYPE {family} counter"
        for exporter in exporters:
            for device in exporter.devices:
                labels = {"instance": exporter.instance, "job": exporter.job, "device": device.name}
                labels.update(exporter.extra_labels)
                rate = getattr(device, attribute)
                start_value = 1e9  # counters never start at zero in real life
                for t in times:
                    if device.reset_at is not None and t > end - device.reset_at:
                        value = rate * (t - (end - device.reset_at))
                    else:
                        value = start_value + rate * (t - times[0])
                    if exporter.non_finite and attribute == "rx" and t == times[-1]:
                        value = math.nan
                    text = "NaN" if math.isnan(value) else f"{value:.3f}"
                    yield f"{family}_total{_labels(labels)} {text} {t:.3f}"
    yield "# TYPE node_network_speed_bytes gauge"
    for exporter in exporters:
        for device in exporter.devices:
            if device.speed is None:
                continue
            labels = {"instance": exporter.instance, "job": exporter.job, "device": device.name}
            labels.update(exporter.extra_labels)
            for t in times:
                yield f"node_network_speed_bytes{_labels(labels)} {device.speed:.0f} {t:.3f}"
    yield "# TYPE node_uname_info gauge"
    for exporter in exporters:
        if exporter.nodename is None:
            continue
        labels = {"instance": exporter.instance, "job": exporter.job, "nodename": exporter.nodename}
        for t in times:
            yield f"node_uname_info{_labels(labels)} 1 {t:.3f}"


def write_blocks(
    data_dir: str,
    exporters: Sequence[Exporter],
    end: float,
    duration: float = 600,
    more: Iterable[str] = (),
) -> None:
    """Backfill ``duration`` seconds of samples ending at ``end`` into
    ``data_dir``; ``more``: further OpenMetrics lines (other families)."""
    with tempfile.NamedTemporaryFile("w", suffix=".om", delete=False) as handle:
        for line in _series_lines(exporters, end, duration):
            handle.write(line + "\n")
        for line in more:
            handle.write(line + "\n")
        handle.write("# EOF\n")
        source = handle.name
    try:
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics", source, data_dir],
            check=True,
            capture_output=True,
            text=True,
        )
    finally:
        os.unlink(source)


class PrometheusServer:
    """``prometheus`` on 127.0.0.1:<free port>; stop() ends it and removes its
    files, ``data_dir`` included."""

    def __init__(
        self,
        data_dir: str | None = None,
        scrape_targets: Sequence[str] = (),
        scrape_interval: str = "5s",
        scrape_configs: Sequence[dict[str, Any]] = (),
        rule_files: Sequence[str] = (),
    ) -> None:
        """``scrape_targets`` are node exporters; ``scrape_configs`` are
        further scrape jobs as Prometheus's config takes them."""
        self.workdir = tempfile.mkdtemp(prefix="nt-prom-")
        self.data_dir = data_dir or os.path.join(self.workdir, "data")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = os.path.join(self.workdir, "prometheus.yml")
        jobs = list(scrape_configs)
        if scrape_targets:
            jobs.insert(
                0,
                {
                    "job_name": "node-exporter",
                    "honor_labels": True,
                    "static_configs": [{"targets": list(scrape_targets)}],
                },
            )
        document: dict[str, Any] = {"global": {"scrape_interval": scrape_interval}}
        if jobs:
            document["scrape_configs"] = jobs
        if rule_files:
            document["global"]["evaluation_interval"] = scrape_interval
            document["rule_files"] = list(rule_files)
        with open(config, "w") as handle:
            yaml.safe_dump(document, handle)
        self.log_path = os.path.join(self.workdir, "prometheus.log")
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self._argv = [
            shutil.which("prometheus") or "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={self.data_dir}",
            "--storage.tsdb.retention.time=30d",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        self.process = subprocess.Popen(self._argv, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def restart(self) -> None:
        """Stop the server (SIGTERM) and start it again on the same port and data."""
        stop_process(self.process)
        self.process = subprocess.Popen(self._argv, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                with open(self.log_path) as log:
                    raise RuntimeError(f"prometheus exited: {log.read()[-2000:]}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("prometheus did not become ready within 60s")

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def prometheus_with_history(
    exporters: Sequence[Exporter], end: float, duration: float = 600, more: Iterable[str] = ()
) -> PrometheusServer:
    data_dir = tempfile.mkdtemp(prefix="nt-prom-data-")
    write_blocks(data_dir, exporters, end, duration, more)
    return PrometheusServer(data_dir=data_dir)  # owns data_dir from now on
