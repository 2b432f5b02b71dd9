"""One measurement of the cluster: ask the sources, score every node, and
return the outcome as an immutable Snapshot, publishing nothing.

``Measurer.measure`` is the refresher's work; the Scoreboard publishes what
it returns (scoreboard.py). The webhook measures in a child process and the
serving process records what it is sent (refresher_process.py); the plugin
measures and records in one process (engine.py).

Source choice per refresh: Prometheus when configured and it answers;
otherwise metrics-server when enabled (the fallback); otherwise no snapshot,
and the published one ages until it is stale, at which point steering stops
(better no advice than old advice).
"""

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import overload

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.nodes import Node, ineligibility
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.scoring.node_scores import NodeScore, score_nodes
from kubectl_nettraffic.scoring.readings import NodeTraffic, NodeUsage
from kubectl_nettraffic.scoring.tiers import TierLabelStatus
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource, TrafficReport

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Diagnostics:
    unmapped_series: tuple[str, ...] = ()
    nodes_without_series: tuple[str, ...] = ()
    duplicate_exporters: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    non_finite: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    # What learning lacks (cadvisor, kube-state-metrics): nothing is learned then.
    learning_missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Snapshot:
    generated_at: float  # the time the measurements describe (epoch seconds)
    source: str  # prometheus | metrics-server
    window: float  # rate window in seconds (prometheus)
    scores: tuple[NodeScore, ...]  # ranked, best first
    nodes: Mapping[str, Node]
    diagnostics: Diagnostics
    # For placement: eligible nodes with data (best first), and nodes with
    # data blocked only by taints, which a tolerating pod may still use.
    candidates: tuple[NodeScore, ...] = ()
    tainted: tuple[NodeScore, ...] = ()
    # Per-workload bandwidth learned so far (None: learning off or not yet).
    learned: LearnedBandwidth | None = None

    def age(self, now: float) -> float:
        return max(0.0, now - self.generated_at)


@dataclass(frozen=True)
class RefreshOutcome:
    """What one refresh measured, before it is published (``Scoreboard.record``)."""

    snapshot: Snapshot | None  # None: nothing answered; the current snapshot stays
    failed_sources: tuple[str, ...]  # prometheus | metrics-server | nodes
    errors: tuple[str, ...]
    seconds: float
    tier_labels: TierLabelStatus | None = None  # the refresher's label writer, if it runs


NodesProvider = Callable[[], Sequence[Node]]


class _NodesUnavailable(Exception):
    """The node list failed while a source was using it; not that source's fault."""


class _DeferredNodes(Sequence[Node]):
    """The node list of this refresh, waited for only when first used."""

    def __init__(self, pending: "Future[list[Node]]") -> None:
        self._pending = pending

    def _nodes(self) -> list[Node]:
        try:
            return self._pending.result()
        except NetTrafficError as error:
            raise _NodesUnavailable(str(error)) from error

    def __len__(self) -> int:
        return len(self._nodes())

    @overload
    def __getitem__(self, index: int) -> Node: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Node]: ...
    def __getitem__(self, index: int | slice) -> Node | Sequence[Node]:
        return self._nodes()[index]

    def __iter__(self) -> Iterator[Node]:
        return iter(self._nodes())


class Measurer:
    """Measures the nodes from the configured sources; holds no published state."""

    def __init__(
        self,
        settings: Settings,
        nodes: NodesProvider,
        prometheus: PrometheusSource | None = None,
        metrics_server: MetricsServerSource | None = None,
        clock: Callable[[], float] = time.time,
        learning: BandwidthLearning | None = None,
    ) -> None:
        self.settings = settings
        self._nodes = nodes
        self.prometheus = prometheus
        self.metrics_server = metrics_server
        self.learning = learning
        self.clock = clock
        self.selector = parse_selector(settings.nodes.selector)
        self._measure_lock = threading.Lock()  # one measurement at a time

    def _fetch_traffic(
        self, nodes: Sequence[Node], errors: list[str], failed: list[str]
    ) -> TrafficReport | None:
        if self.prometheus is None:
            return None
        try:
            return self.prometheus.fetch(nodes)
        except NetTrafficError as error:
            failed.append("prometheus")
            errors.append(f"prometheus: {error}")
            log.warning("prometheus refresh failed: %s", error)
            return None

    def _fetch_usage(self, errors: list[str], failed: list[str]) -> Mapping[str, NodeUsage] | None:
        if self.metrics_server is None:
            return None
        try:
            return self.metrics_server.fetch()
        except NetTrafficError as error:
            failed.append("metrics-server")
            errors.append(f"metrics-server: {error}")
            log.warning("metrics-server refresh failed: %s", error)
            return None

    def measure(self) -> RefreshOutcome:
        """Measure once, publishing nothing (``Scoreboard.record`` does that)."""
        with self._measure_lock:
            started = time.perf_counter()
            errors: list[str] = []
            failed: list[str] = []
            # The node list and metrics-server usage are fetched while Prometheus
            # answers: the query does not need the nodes, only its attribution does.
            # Usage is read whenever metrics-server is enabled, weighted or not:
            # one list call per refresh, and `top` shows CPU% and MEM% beside traffic.
            with ThreadPoolExecutor(max_workers=2, thread_name_prefix="refresh") as pool:
                listed = pool.submit(lambda: list(self._nodes()))
                usage_pending = pool.submit(self._fetch_usage, errors, failed)
                try:
                    report = self._fetch_traffic(_DeferredNodes(listed), errors, failed)
                    nodes = listed.result()
                except (_NodesUnavailable, NetTrafficError) as failure:
                    error = failure.__cause__ if isinstance(failure, _NodesUnavailable) else failure
                    log.warning("node inventory failed: %s", error)
                    return RefreshOutcome(
                        None, ("nodes",), (f"nodes: {error}",), time.perf_counter() - started
                    )
                usage = usage_pending.result()
            if report is None and usage is None:
                return RefreshOutcome(
                    None, tuple(failed), tuple(errors), time.perf_counter() - started
                )
            snapshot = self._snapshot_of(nodes, report, usage, tuple(errors))
            return RefreshOutcome(
                snapshot, tuple(failed), tuple(errors), time.perf_counter() - started
            )

    def _snapshot_of(
        self,
        nodes: Sequence[Node],
        report: TrafficReport | None,
        usage: Mapping[str, NodeUsage] | None,
        errors: tuple[str, ...],
    ) -> Snapshot:
        traffic: Mapping[str, NodeTraffic] | None = report.by_node if report else None
        scores = score_nodes(
            nodes,
            traffic,
            usage,
            self.settings.scoring,
            self.settings.prometheus.direction,
            self.selector,
            idle_scale=self.settings.steering.default_pod_bandwidth,
        )
        diagnostics = Diagnostics(
            unmapped_series=report.unmapped_series if report else (),
            nodes_without_series=report.nodes_without_series if report else (),
            duplicate_exporters=report.duplicate_exporters if report else {},
            non_finite=report.non_finite if report else (),
            errors=errors,
            learning_missing=self.learning.missing if self.learning else (),
        )
        by_name = {node.name: node for node in nodes}
        tolerate_all = [{"operator": "Exists"}]
        return Snapshot(
            generated_at=report.evaluated_at if report else self.clock(),
            source="prometheus" if report else "metrics-server",
            window=self.settings.prometheus.window,
            scores=tuple(scores),
            nodes=by_name,
            diagnostics=diagnostics,
            candidates=tuple(s for s in scores if s.eligible and s.has_data),
            tainted=tuple(
                s
                for s in scores
                if not s.eligible
                and s.has_data
                and ineligibility(by_name[s.name], self.selector, tolerate_all) is None
            ),
            learned=self.learning.latest() if self.learning else None,
        )
