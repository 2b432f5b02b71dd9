"""The load bench.learning puts on a real Prometheus: every pod's cAdvisor
and kube-state-metrics series (PodSeriesExporter), and each replica's node
refresh (Refreshes) and learner (LearnerRun) as its refresher process runs
them, each query timed."""

import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from harness.exporter import serve_metrics
from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.pod_slices import WHOLE, PodSlice
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport, PodTrafficSource
from kubectl_nettraffic.measuring.engine import FileNodes
from kubectl_nettraffic.measuring.measurement import Measurer
from kubectl_nettraffic.sources.prometheus import PrometheusSource

PODS_EACH = 10
ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand/rand.go


class Cluster(NamedTuple):
    nodes: int
    deployments: int  # of PODS_EACH pods

    @property
    def pods(self) -> int:
        return self.deployments * PODS_EACH


class Refreshes:
    """The refresh's node query every refresh.interval on a thread, through
    the Measurer the refresher process runs, each query's start and time
    recorded; ``at``: the time its queries are evaluated at."""

    def __init__(self, settings: Settings, at: Callable[[], float] = time.time) -> None:
        self.measurer = Measurer(
            settings,
            FileNodes(settings.nodes.file),
            PrometheusSource(settings.prometheus, clock=at),
        )
        self.interval = settings.refresh.interval
        self.queries: list[tuple[str, float, float]] = []  # kind, start (monotonic), seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def minute(self, index: int) -> None:
        if index == 0:
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            outcome = self.measurer.measure()
            assert outcome.snapshot is not None, outcome.errors
            self.queries.append(("nodes", started, time.monotonic() - started))
            self._stop.wait(max(0.0, started + self.interval - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class LearnerRun:
    """The learner as the webhook runs it (its thread, its schedule), with
    every round's kind and query time recorded, and a new Deployment added
    in its second minute: how long until the learner knows it."""

    def __init__(
        self,
        settings: Settings,
        source: PodTrafficSource,
        exporter: "PodSeriesExporter | None" = None,
    ) -> None:
        self.source = source
        self.exporter = exporter  # None: no new Deployment
        self.rounds: list[tuple[str, float, float]] = []  # kind, start (monotonic), seconds
        self.added_at: float | None = None
        self.learned_after: float | None = None
        self.new = Workload("ns-new", "Deployment", "arrival")
        self.learning = BandwidthLearning(settings, self)

    def pod_count(self) -> int:
        started = time.monotonic()
        try:
            return self.source.pod_count()
        finally:
            self.rounds.append(("count", started, time.monotonic() - started))

    def samples(self, pods: PodSlice = WHOLE) -> PodTrafficReport:
        return self._timed("slice", lambda: self.source.samples(pods))

    def young_samples(self) -> PodTrafficReport:
        return self._timed("young", self.source.young_samples)

    def _timed(self, kind: str, read: Callable[[], PodTrafficReport]) -> PodTrafficReport:
        started = time.monotonic()
        try:
            return read()
        finally:
            self.rounds.append((kind, started, time.monotonic() - started))
            threading.Thread(target=self._check, daemon=True).start()

    def _check(self) -> None:
        time.sleep(1)  # the round's update has published by then
        latest = self.learning.latest()
        if (
            self.added_at is not None
            and self.learned_after is None
            and latest is not None
            and self.new in latest.workloads
        ):
            self.learned_after = time.time() - self.added_at

    def minute(self, index: int) -> None:
        if index == 0:
            self.learning.start()
        if index == 1 and self.exporter is not None:
            self.added_at = time.time()
            self.exporter.add_deployment(self.new.namespace, self.new.name, self.added_at)


class PodSeriesExporter:
    """cAdvisor and kube-state-metrics series for every pod, counters growing
    in real time; ``add_deployment`` starts a new one's pods sending now.
    Pod names end as the ReplicaSet controller's generated ones do (five
    characters of k8s.io/apimachinery/pkg/util/rand's alphanums)."""

    def __init__(self, cluster: Cluster, seed: int = 3) -> None:
        self.cluster = cluster
        self.rng = np.random.default_rng(seed)
        self.started = time.time()
        self.names: list[str] = []
        self.rates = np.zeros(0)
        self.starts = np.zeros(0)
        self.static: list[str] = []
        self.lock = threading.Lock()
        for d in range(cluster.deployments):
            self.add_deployment(f"ns-{d % 200}", f"app-{d}", self.started - 86400)
        self.server = serve_metrics(self.render)
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def add_deployment(self, namespace: str, deployment: str, created: float) -> None:
        replicaset = f"{deployment}-5f6a7b"
        static = [
            f'kube_replicaset_owner{{namespace="{namespace}",replicaset="{replicaset}",'
            f'owner_kind="Deployment",owner_name="{deployment}",owner_is_controller="true"}} 1',
            f'kube_replicaset_created{{namespace="{namespace}",replicaset="{replicaset}"}} {created:.0f}',
        ]
        mean = self.rng.lognormal(np.log(2e6), 1.0)
        names, rates = [], []
        for _ in range(PODS_EACH):
            suffix = "".join(self.rng.choice(list(ALPHANUMS), 5))
            pod = f"{replicaset}-{suffix}"
            node = f"node-{len(self.names) % self.cluster.nodes:05d}"
            names.append(
                f'namespace="{namespace}",pod="{pod}",container="",interface="eth0",node="{node}"'
            )
            rates.append(self.rng.lognormal(np.log(mean), 0.3))
            labels = f'namespace="{namespace}",pod="{pod}"'
            static += [
                f'kube_pod_owner{{{labels},owner_kind="ReplicaSet",'
                f'owner_name="{replicaset}",owner_is_controller="true"}} 1',
                f'kube_pod_info{{{labels},node="{node}",host_network="false"}} 1',
                f"kube_pod_created{{{labels}}} {created:.0f}",
            ]
        with self.lock:
            self.names += names
            self.rates = np.concatenate([self.rates, rates])
            self.starts = np.concatenate(
                [self.starts, np.full(len(rates), max(created, self.started))]
            )
            self.static += static

    def render(self) -> bytes:
        with self.lock:
            names, rates, starts, static = self.names, self.rates, self.starts, self.static[:]
        elapsed = np.maximum(0.0, time.time() - starts)
        lines = []
        for family, share in (("receive", 0.7), ("transmit", 0.3)):
            totals = 1e9 + rates * share * elapsed
            lines.append(f"# TYPE container_network_{family}_bytes_total counter")
            lines.extend(
                f"container_network_{family}_bytes_total{{{n}}} {v:.0f}"
                for n, v in zip(names, totals, strict=True)
            )
        return ("\n".join(lines) + "\n" + "\n".join(static) + "\n").encode()

    def stop(self) -> None:
        self.server.shutdown()
