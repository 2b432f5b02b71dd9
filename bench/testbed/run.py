"""One testbed run: build the emulated cluster, run the same arrivals under
each placement policy, measure what the pods felt, tear everything down.

Policies:
- ``nettraffic``: the real webhook (gunicorn over TLS) mutates each pod;
  the scheduler stand-in scores its preferred terms.
- ``default``: no webhook; the same scheduler stand-in (requests,
  spreading, resource balance: what kube-scheduler does without it).
- ``optimum``: each pod where the exact class-blind optimum of the run's
  arrivals puts it (bench/testbed/optimum.py): every flow's true rate and
  the hot nodes' uploads known, which pods are latency-sensitive not.
- ``nettraffic-faults``: as nettraffic, with a quiet node's exporter killed
  a third of the way through the arrivals and Prometheus restarted at two
  thirds.
"""

import contextlib
import os
import random
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence

import numpy as np
import requests
import yaml

from bench.testbed.cluster import ControlPlane, PlacedPod, Placement, node_object
from bench.testbed.cpus import off_the_measuring_cpu
from bench.testbed.echo import round_trips
from bench.testbed.network import (
    PREFIX,
    PROBE_NAMESPACE,
    Network,
    can_create_namespaces,
    remove_leftovers,
    run,
)
from bench.testbed.observe import (
    LinkSampler,
    NodeExporters,
    PodMetrics,
    PodSeries,
    scrape_configs,
)
from bench.testbed.optimum import optimum_nodes
from bench.testbed.results import Placed, PolicyResult, TestbedResult
from bench.testbed.settings import TestbedSettings
from bench.testbed.stats import percentiles
from bench.testbed.teardown import Emulated, stop_all
from bench.testbed.workload import (
    Arrival,
    PodProcess,
    Sinks,
    start_background,
    start_pod_process,
)
from harness.fakeapi import FakeKubeAPI
from harness.prometheus import PrometheusServer
from harness.webhook import WebhookProcess

HOT = 0.8  # a link above this share of its rate, in either direction, is hot


def _cpu_times() -> tuple[float, float]:
    with open("/proc/stat") as handle:
        values = [float(v) for v in handle.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class Testbed(Emulated):
    """The emulated cluster; a context manager that always tears down."""

    def __init__(self, settings: TestbedSettings, log: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.log = log
        self.workdir = tempfile.mkdtemp(prefix="nt-testbed-")
        self.node_names = [f"tb-node-{i}" for i in range(1, settings.nodes + 1)]
        self.control: ControlPlane | None = None
        self._parts: list[Callable[[], None]] = []
        self._pod_counters: dict[str, list[tuple[float, int, int]]] = {}
        self._background: list[PodProcess] = []
        self.hot: list[int] = []

    # ------------------------------------------------------------ lifecycle

    def unavailable(self) -> str | None:
        return why_unavailable()

    def _keep_off_the_measuring_cpu(self) -> None:
        # Everything started from here on (threads and processes) inherits
        # it; the measurers move to their CPU as they start (cpus.py).
        confinement = contextlib.ExitStack()
        confinement.enter_context(off_the_measuring_cpu())
        self._parts.append(confinement.close)

    def _build(self) -> None:
        self._keep_off_the_measuring_cpu()
        s = self.settings
        self.log(f"network: {s.nodes} nodes at {s.link_bits / 1e6:g} Mbit/s on bridge {PREFIX}0")
        self.network = Network(self.node_names, int(s.link_bits), s.kernel_tcp_bursts)
        self._parts.append(self.network.close)
        bulk_flows = sum(1 for a in s.mix.arrivals(s.seed) if a.kind == "bulk")
        self.sinks = Sinks(self.workdir, ports=bulk_flows + s.hot_nodes + 2)
        self._parts.append(self.sinks.stop)
        self.exporters = NodeExporters(self.network.nodes, s.link_bits, self.workdir)
        self._parts.append(self.exporters.stop)
        self.pod_metrics = PodMetrics(self._pod_series)
        self._parts.append(self.pod_metrics.stop)
        interval = f"{s.scrape_interval:g}s"
        self.prometheus = PrometheusServer(
            scrape_interval=interval,
            scrape_configs=scrape_configs(self.exporters, self.pod_metrics),
        )
        self._parts.append(self.prometheus.stop)
        self.api = FakeKubeAPI()
        self._parts.append(self.api.stop)
        for testbed_node in self.network.nodes:
            self.api.put(node_object(testbed_node))
        self.api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
        self.kubeconfig = self.api.kubeconfig(os.path.join(self.workdir, "kubeconfig"))
        self.config = {
            "kubeconfig": self.kubeconfig,
            "prometheus": {"url": self.prometheus.url, "window": f"{s.window:g}s"},
            "metricsServer": {"enabled": False},
            "scoring": {"mode": "link-utilization"},
            "refresh": {"interval": f"{s.refresh:g}s", "maxStaleness": "30s"},
            # Pods start sending within a second here. Everything else is
            # the product's default, traffic tiers included.
            "steering": {"podStartup": "2s"},
            "learning": {"interval": "5s"},
        }
        self.config_path = os.path.join(self.workdir, "config.yaml")
        with open(self.config_path, "w") as handle:
            yaml.safe_dump(self.config, handle)
        self.sampler = LinkSampler(self.network.nodes, on_tick=self._sample_pods)
        self._parts.append(self.sampler.stop)
        self._wait_for_samples()
        self.webhook = WebhookProcess(self.config)
        self._parts.append(self.webhook.stop)

    def close(self) -> None:
        stop_all(self._parts, self.log)
        for process in self._background:
            process.stop()
        remove_leftovers()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _wait_for_samples(self, timeout: float = 60.0) -> None:
        """Until Prometheus holds a whole window of every node's samples."""
        s = self.settings
        query = f"count(count_over_time(node_uname_info[{s.window:g}s]) >= {int(s.window / s.scrape_interval) - 1})"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = requests.get(
                f"{self.prometheus.url}/api/v1/query", params={"query": query}, timeout=5
            ).json()["data"]["result"]
            if answer and int(float(answer[0]["value"][1])) >= s.nodes:
                return
            time.sleep(0.5)
        raise RuntimeError(f"Prometheus had no whole window of every node within {timeout:g}s")

    # ------------------------------------------------------------ pods' counters

    def _sample_pods(self) -> None:
        control = self.control
        if control is None:
            return
        now = time.time()
        for placed in list(control.pods):
            if placed.process is not None:
                counters = placed.process.counters()
                if counters is not None:
                    self._pod_counters.setdefault(placed.name, []).append((now, *counters))
        control.poll_exits()

    def _pod_series(self) -> list[PodSeries]:
        control = self.control
        if control is None:
            return []
        series = []
        for placed in list(control.pods):
            history = self._pod_counters.get(placed.name)
            if placed.process is None or not history or placed.process.exited():
                continue
            arrival = placed.arrival
            series.append(
                PodSeries(
                    "default",
                    placed.name,
                    arrival.replica_set,
                    arrival.workload,
                    placed.created,
                    history[-1][1],
                    history[-1][2],
                )
            )
        return series

    # ------------------------------------------------------------ measuring

    def idle(self) -> list[tuple[float, float]]:
        """Every link idle, the machine quiet: the probe's client alone."""
        seconds = self.settings.idle_seconds
        self.log(f"idle: the reference client alone for {seconds:g} s")
        process = start_pod_process("latency", PROBE_NAMESPACE, 0.0, self.workdir, "idle", None)
        time.sleep(seconds)
        process.stop()
        return round_trips(process.latency_path or "", skip=1.0)

    def start_background(self, hot: Sequence[int]) -> None:
        self.hot = list(hot)
        for index in hot:
            testbed_node = self.network.nodes[index]
            port = self.sinks.take_port()
            self._background.append(
                start_background(testbed_node.namespace, port, self.workdir, f"background-{index}")
            )
        self.log(f"background: greedy uploads on {', '.join(self.node_names[i] for i in hot)}")

    def top(self) -> str:
        """kubectl nettraffic top, as a user runs it against the testbed."""
        kubectl = shutil.which("kubectl")
        plugin = shutil.which("kubectl-nettraffic") or "kubectl-nettraffic"
        command = [kubectl, "nettraffic"] if kubectl else [plugin]
        done = subprocess.run(
            [*command, "top", "--source", "prometheus", "--config", self.config_path, "-o", "wide"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return (done.stdout + done.stderr).rstrip()

    def run_policy(
        self, policy: str, arrivals: Sequence[Arrival], hot: Sequence[int]
    ) -> PolicyResult:
        s = self.settings
        faults = policy.endswith("-faults")
        self.log(f"{policy}: {len(arrivals)} pods over {s.mix.spread:g} s, then {s.hold:g} s held")
        background = np.zeros((s.nodes, 2))
        background[list(hot)] = [s.link_bits / 40, s.link_bits]  # the greedy uploads
        plan = None
        if policy == "optimum":
            nodes = optimum_nodes(arrivals, background, s.link_bits)
            plan = {(a.at, a.workload): node for a, node in zip(arrivals, nodes, strict=True)}
        placement = Placement(
            policy.removesuffix("-faults"), self.network.nodes, s.link_bits, s.seed, plan
        )
        for index in hot:
            placement.add_background(index, background[index])
        webhook = None
        if policy.startswith("nettraffic"):
            webhook = (self.webhook.url, self.webhook.session)
        # Seeded per policy: the pods' generated names differ from one policy's
        # run to the next, as their logs and counters do.
        rng = random.Random(f"{s.seed}-{policy}")
        self._pod_counters.clear()
        control = ControlPlane(
            self.api, self.network, placement, self._starter(), webhook, s.bind_delay, rng
        )
        self.control = control
        probe = start_pod_process(
            "latency", PROBE_NAMESPACE, 0.0, self.workdir, f"probe-{policy}", None
        )
        result_notes: list[str] = []
        top_after_fault = ""
        started = time.time()
        first = arrivals[0].at
        killed = self.network.nodes[next(i for i in range(s.nodes) if i not in hot)].name
        fault_times = [first + (s.mix.spread - first) / 3, first + 2 * (s.mix.spread - first) / 3]
        for arrival in arrivals:
            while faults and fault_times and arrival.at >= fault_times[0]:
                self._sleep_until(started + fault_times[0] - first)
                if len(fault_times) == 2:
                    self.exporters.kill(killed)
                    result_notes.append(
                        f"exporter of {killed} killed at {time.time() - started:.0f} s"
                    )
                else:
                    self.prometheus.restart()
                    result_notes.append(f"Prometheus restarted at {time.time() - started:.0f} s")
                    top_after_fault = self.top()
                fault_times.pop(0)
            self._sleep_until(started + arrival.at - first)
            control.create(arrival)
        end_of_arrivals = time.time()
        self._sleep_until(end_of_arrivals + s.hold / 2)
        top_at_peak = self.top() if policy.startswith("nettraffic") else ""
        self._sleep_until(end_of_arrivals + s.hold)
        ended = time.time()
        probe.stop()
        result = self._collect(policy, control, started, ended, probe)
        result.top_at_peak, result.top_after_fault = top_at_peak, top_after_fault
        result.notes = result_notes
        control.stop()
        if faults:
            self.exporters.start(next(n for n in self.network.nodes if n.name == killed))
        return result

    def settle(self) -> None:
        """Until the product's window no longer shows the last policy's pods."""
        time.sleep(self.settings.window + self.settings.refresh + 2)

    def _starter(self) -> Callable[[PlacedPod, str], PodProcess]:
        def start(placed: PlacedPod, namespace: str) -> PodProcess:
            port = self.sinks.take_port() if placed.arrival.kind == "bulk" else None
            process = start_pod_process(
                placed.arrival.kind, namespace, placed.arrival.bits, self.workdir, placed.name, port
            )
            if port is not None:
                process.on_stop = lambda: self.sinks.give_back(port)
            return process

        return start

    @staticmethod
    def _sleep_until(when: float) -> None:
        time.sleep(max(0.0, when - time.time()))

    def _collect(
        self, policy: str, control: ControlPlane, started: float, ended: float, probe: PodProcess
    ) -> PolicyResult:
        s = self.settings
        self.control = None  # the pods stop below: no longer sampled, nor reported Failed
        failed = sum(p.failed for p in control.pods)
        latency: list[tuple[float, float]] = []
        bulk: list[tuple[str, float, float]] = []
        landed_hot: dict[str, int] = {}
        placements = []
        for placed in control.pods:
            if placed.node is None or placed.bound is None:
                continue
            kind = placed.arrival.kind
            index = next(n.index - 1 for n in self.network.nodes if n.name == placed.node)
            if self.sampler.utilisation_at(placed.bound, s.link_bits)[index] > HOT:
                landed_hot[kind] = landed_hot.get(kind, 0) + 1
            p99 = None
            if kind == "latency" and placed.process is not None and placed.process.latency_path:
                placed.process.stop()
                own = round_trips(placed.process.latency_path, skip=1.0)
                p99 = percentiles(own, (0.99,))[0]
                latency += own
            if kind == "bulk":
                history = [
                    h for h in self._pod_counters.get(placed.name, []) if h[0] >= placed.bound + 3
                ]
                if len(history) >= 2:  # (time, received, sent)
                    sent = (history[-1][2] - history[0][2]) * 8 / (history[-1][0] - history[0][0])
                    bulk.append((placed.name, sent, placed.arrival.bits))
            placements.append(
                Placed(
                    placed.name,
                    placed.arrival.workload,
                    kind,
                    placed.node,
                    placed.preferred,
                    placed.bandwidth_source,
                    placed.created - started,
                    p99,
                )
            )
        window = [sample for sample in self.sampler.samples if started <= sample.at <= ended]
        hot_seconds = sum(
            sample.seconds
            for sample in window
            for rx, tx in sample.rates
            if max(rx, tx) > HOT * s.link_bits
        )
        # What the data pushes (the background uploads) sent meanwhile.
        pushes = [sample.rates[i][1] for sample in window for i in self.hot]
        return PolicyResult(
            policy,
            started,
            ended,
            latency,
            round_trips(probe.latency_path or "", skip=1.0),
            bulk,
            hot_seconds,
            landed_hot,
            placements,
            failed,
            control.webhook_failures,
            push_ratio=(sum(pushes) / len(pushes) / s.link_bits) if pushes else float("nan"),
        )


def why_unavailable() -> str | None:
    """None when this machine can run the testbed, else what is missing."""
    for tool, package in (
        ("iperf3", "iperf3"),
        ("prometheus-node-exporter", "prometheus-node-exporter"),
        ("prometheus", "prometheus"),
        ("unshare", "util-linux"),
        ("taskset", "util-linux"),
        ("inetd", "openbsd-inetd"),
        ("gcc", "gcc"),  # builds the latency client and the zones' delay (compiled.py)
    ):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian package {package})"
    return can_create_namespaces()


def leftovers() -> list[str]:
    """Anything of the testbed's still on the machine."""
    found = [
        line.split()[0]
        for line in run("ip", "netns", "list").splitlines()
        if line.split() and line.split()[0].startswith(PREFIX + "-")
    ]
    found += [
        line.split(": ")[1].split("@")[0]
        for line in run("ip", "-o", "link", "show").splitlines()
        if len(line.split(": ")) > 1 and line.split(": ")[1].startswith(PREFIX)
    ]
    processes = subprocess.run(
        ["pgrep", "-f", "prometheus-node-exporter|iperf3 |echo_client|nt-testbed"],
        capture_output=True,
        text=True,
    ).stdout.split()
    found += [f"process {pid}" for pid in processes if int(pid) != os.getpid()]
    return found


def run_testbed(settings: TestbedSettings, log: Callable[[str], None] = print) -> TestbedResult:
    rng = random.Random(settings.seed)
    hot = sorted(rng.sample(range(settings.nodes), settings.hot_nodes))
    arrivals = settings.mix.arrivals(settings.seed)
    policies = list(settings.policies)
    if settings.faults and "nettraffic" in policies:
        policies.append("nettraffic-faults")
    busy_before, total_before = _cpu_times()
    with Testbed(settings, log) as testbed:
        idle = testbed.idle()
        testbed.start_background(hot)
        time.sleep(settings.window + settings.refresh)
        results = []
        for number, policy in enumerate(policies):
            if number:
                testbed.settle()
            results.append(testbed.run_policy(policy, arrivals, hot))
    busy_after, total_after = _cpu_times()
    time.sleep(0.5)
    return TestbedResult(
        settings,
        idle,
        results,
        leftovers(),
        (busy_after - busy_before) / max(1.0, total_after - total_before),
    )
