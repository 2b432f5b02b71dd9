"""What the testbed measures, and what it shows the product.

- ``NodeExporters``: Debian's prometheus-node-exporter inside each node's
  network namespace and a UTS namespace of its own whose hostname is the
  node's name, so ``node_uname_info{nodename}`` joins its series to the
  Node as on a real install (prometheus.nodeMatch: uname). Only the netdev,
  uname and textfile collectors run. A veth reports 10 Gbit/s in sysfs
  whatever tc does to it, so the netclass collector is off and the shaped
  rate is written as ``node_network_speed_bytes{device="eth0"}`` by the
  textfile collector: the series the product reads for
  scoring.mode: link-utilization.
- ``PodMetrics``: the kubelet's cAdvisor counters and kube-state-metrics'
  owner series for the pods the kubelet stand-in runs, on 127.0.0.1: what
  the product's learner reads (sources/pod_traffic.py).
- ``LinkSampler``: every second, each node's link counters from the
  bridge's end of its veth (its transmit is the node's receive), for the
  report's figures: the product never reads them.
"""

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bench.testbed.network import PREFIX, TestbedNode
from harness.exporter import serve_metrics

EXPORTER_PORT = 9100


class NodeExporters:
    def __init__(self, nodes: Sequence[TestbedNode], link_bits: float, workdir: str) -> None:
        self.nodes = list(nodes)
        self.link_bits = link_bits
        self.workdir = workdir
        self.binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
        if self.binary is None:
            raise RuntimeError(
                "prometheus-node-exporter is not installed: apt-get install prometheus-node-exporter"
            )
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        for node in self.nodes:
            self.start(node)

    @property
    def targets(self) -> list[str]:
        return [f"{node.address}:{EXPORTER_PORT}" for node in self.nodes]

    def start(self, node: TestbedNode) -> None:
        textfiles = os.path.join(self.workdir, f"textfile-{node.index}")
        os.makedirs(textfiles, exist_ok=True)
        with open(os.path.join(textfiles, "link.prom"), "w") as handle:
            handle.write(
                "# TYPE node_network_speed_bytes gauge\n"
                f'node_network_speed_bytes{{device="eth0"}} {self.link_bits / 8:.0f}\n'
            )
        exporter = (
            f"{self.binary} --web.listen-address={node.address}:{EXPORTER_PORT}"
            " --collector.disable-defaults --collector.netdev --collector.uname"
            f" --collector.textfile --collector.textfile.directory={textfiles}"
            " --web.disable-exporter-metrics"
        )
        log = open(os.path.join(self.workdir, f"exporter-{node.index}.log"), "ab")  # noqa: SIM115
        with log:
            self.processes[node.name] = subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    node.namespace,
                    "unshare",
                    "--uts",
                    "sh",
                    "-c",
                    f"hostname {node.name} && exec {exporter}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self, name: str) -> None:
        """The exporter dies (SIGKILL): its node goes unmeasured."""
        process = self.processes[name]
        process.kill()
        process.wait()

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()


@dataclass(frozen=True)
class PodSeries:
    namespace: str
    pod: str
    replicaset: str
    deployment: str
    created: float
    receive_bytes: int
    transmit_bytes: int
    node: str = ""  # kube_pod_info's node, when the learner is to know it


class PodMetrics:
    """cAdvisor and kube-state-metrics series for the running pods."""

    def __init__(self, pods: Callable[[], Sequence[PodSeries]]) -> None:
        self.pods = pods
        self.server = serve_metrics(lambda: self.render().encode())
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def render(self) -> str:
        pods = list(self.pods())
        families: list[tuple[str, str, list[tuple[str, float]]]] = []
        for direction in ("receive", "transmit"):
            rows: list[tuple[str, float]] = [
                (
                    f'namespace="{p.namespace}",pod="{p.pod}",interface="eth0",container=""',
                    p.receive_bytes if direction == "receive" else p.transmit_bytes,
                )
                for p in pods
            ]
            families.append((f"container_network_{direction}_bytes_total", "counter", rows))
        families.append(
            (
                "kube_pod_owner",
                "gauge",
                [
                    (
                        f'namespace="{p.namespace}",pod="{p.pod}",owner_kind="ReplicaSet",'
                        f'owner_name="{p.replicaset}",owner_is_controller="true"',
                        1,
                    )
                    for p in pods
                ],
            )
        )
        families.append(
            (
                "kube_pod_info",
                "gauge",
                [
                    (
                        f'namespace="{p.namespace}",pod="{p.pod}",host_network="false"'
                        + (f',node="{p.node}"' if p.node else ""),
                        1,
                    )
                    for p in pods
                ],
            )
        )
        replicasets = {(p.namespace, p.replicaset, p.deployment): p.created for p in pods}
        families.append(
            (
                "kube_replicaset_owner",
                "gauge",
                [
                    (
                        f'namespace="{ns}",replicaset="{rs}",owner_kind="Deployment",'
                        f'owner_name="{deployment}",owner_is_controller="true"',
                        1,
                    )
                    for ns, rs, deployment in replicasets
                ],
            )
        )
        families.append(
            (
                "kube_replicaset_created",
                "gauge",
                [
                    (f'namespace="{ns}",replicaset="{rs}"', at)
                    for (ns, rs, _), at in replicasets.items()
                ],
            )
        )
        lines = []
        for name, kind, rows in families:
            lines.append(f"# TYPE {name} {kind}")
            lines += [f"{name}{{{labels}}} {value:.0f}" for labels, value in rows]
        return "\n".join(lines) + "\n"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _link_counters(index: int) -> tuple[int, int]:
    """(node receive, node transmit) bytes: the bridge end's (transmit, receive)."""
    base = f"/sys/class/net/{PREFIX}n{index}/statistics"
    with open(f"{base}/tx_bytes") as tx, open(f"{base}/rx_bytes") as rx:
        return int(tx.read()), int(rx.read())


@dataclass(frozen=True)
class LinkSample:
    at: float  # its end, epoch seconds
    seconds: float  # how long it covers
    rates: list[tuple[float, float]]  # per node, (receive, transmit) bits/s


class LinkSampler:
    """Each node's receive and transmit bits/s, once a second, on a thread."""

    def __init__(self, nodes: Sequence[TestbedNode], on_tick: Callable[[], None] | None = None):
        self.nodes = list(nodes)
        self.samples: list[LinkSample] = []
        self.on_tick = on_tick
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = [_link_counters(n.index) for n in self.nodes]
        last_time = time.time()
        while not self._stop.wait(1.0):
            now = time.time()
            current = [_link_counters(n.index) for n in self.nodes]
            elapsed = now - last_time
            rates = [
                ((c[0] - p[0]) * 8 / elapsed, (c[1] - p[1]) * 8 / elapsed)
                for c, p in zip(current, last, strict=True)
            ]
            self.samples.append(LinkSample(now, elapsed, rates))
            last, last_time = current, now
            if self.on_tick is not None:
                self.on_tick()

    def utilisation_at(self, when: float, link_bits: float) -> list[float]:
        """Each node's busier direction over the last second before ``when``, 0..1."""
        before = [sample.rates for sample in self.samples if sample.at <= when]
        if not before:
            return [0.0] * len(self.nodes)
        return [max(rx, tx) / link_bits for rx, tx in before[-1]]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def scrape_configs(exporters: NodeExporters, pods: PodMetrics) -> list[dict[str, Any]]:
    """Prometheus's jobs for the nodes' node_exporter and the pods' kubelet
    and kube-state-metrics series (their own labels kept)."""
    return [
        {"job_name": "node-exporter", "static_configs": [{"targets": exporters.targets}]},
        {
            "job_name": "kubelet",
            "honor_labels": True,
            "static_configs": [{"targets": [pods.target]}],
        },
    ]
