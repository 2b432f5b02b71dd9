"""Assembles sources, node inventory, measurer and scoreboard from Settings.

The webhook's refresher process and the plugin's ``--source prometheus`` both
call this, so they score with exactly the same parts.
"""

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.client import ApiClient, api_client
from kubectl_nettraffic.kube.cluster import list_nodes, load_node_file, node_cache
from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.kube.reflector import ListWatchCache
from kubectl_nettraffic.kube.service_routing import read_service_routing
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.peer_traffic import PeerTrafficSource
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.measuring.measurement import Measurer, Snapshot
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource


class FileNodes:
    """Nodes from a ``kubectl get nodes -o json`` file, re-read when it changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime = -1.0
        self._nodes: list[Node] = []

    def __call__(self) -> Sequence[Node]:
        try:
            mtime = os.stat(self.path).st_mtime
        except OSError:
            raise ClusterError(f"nodes.file {self.path!r} does not exist; check the path") from None
        if mtime != self._mtime:
            self._nodes = load_node_file(self.path)
            self._mtime = mtime
        return self._nodes


class WatchedNodes:
    """Nodes from the API server's list + watch cache."""

    def __init__(self, cache: ListWatchCache[Node], sync_timeout: float) -> None:
        self.cache = cache
        self.sync_timeout = sync_timeout

    def __call__(self) -> Sequence[Node]:
        if not self.cache.synced.wait(self.sync_timeout):
            raise ClusterError(
                f"no node list from the API server yet ({self.cache.last_error or 'waiting'}); "
                "check the API server address and RBAC for nodes list/watch"
            )
        return list(self.cache.items().values())


@dataclass
class Engine:
    measurer: Measurer
    scoreboard: Scoreboard
    api: ApiClient | None
    node_watch: ListWatchCache[Node] | None

    def refresh(self) -> Snapshot | None:
        """Measure once and publish: the published snapshot, or None if nothing answered."""
        return self.scoreboard.record(self.measurer.measure())


def needs_api(settings: Settings) -> bool:
    """Whether these settings read anything from the Kubernetes API."""
    return not settings.nodes.file or settings.metrics_server.enabled


def build_engine(
    settings: Settings,
    context: str | None = None,
    api_factory: Callable[[str, str | None], ApiClient] = api_client,
    watch_nodes: bool = True,
    learn: bool = True,
) -> Engine:
    """Wire the parts. ``watch_nodes=False`` lists once per refresh (short CLI
    runs); ``learn=False`` starts no learner (one-shot runs have no history)."""
    api = api_factory(settings.kubeconfig, context) if needs_api(settings) else None
    watch: ListWatchCache[Node] | None = None
    nodes: Callable[[], Sequence[Node]]
    if settings.nodes.file:
        nodes = FileNodes(settings.nodes.file)
    elif watch_nodes:
        assert api is not None
        watch = node_cache(api).start()
        nodes = WatchedNodes(watch, sync_timeout=settings.prometheus.timeout + 5)
    else:
        assert api is not None
        client = api
        nodes = lambda: list_nodes(client)  # noqa: E731
    prometheus = PrometheusSource(settings.prometheus) if settings.prometheus.url else None
    metrics = MetricsServerSource(api) if settings.metrics_server.enabled and api else None
    learning = None
    if prometheus is not None and settings.learning.enabled and learn:
        with_peers = settings.peers.source != "none"
        learning = BandwidthLearning(
            settings,
            PodTrafficSource(
                prometheus,
                settings.learning,
                pod_startup=settings.steering.pod_startup,
                with_nodes=with_peers,
            ),
            peers=PeerTrafficSource(prometheus, settings.peers) if with_peers else None,
            services=None if api is None else functools.partial(read_service_routing, api),
        ).start()
    measurer = Measurer(settings, nodes, prometheus, metrics, learning=learning)
    return Engine(measurer, Scoreboard(settings), api, watch)
