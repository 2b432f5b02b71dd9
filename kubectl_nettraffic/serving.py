"""The webhook's serving objects, built in one place; ``create_app`` receives them.

``serving_parts`` wires the published scores, the in-flight state and the
Steerer, and starts nothing: tests and benchmarks feed its scoreboard by
hand. ``start_serving`` adds what production runs beside them: the
refresher process that feeds the scoreboard, and, where the settings read
the Kubernetes API, the namespace cache, the binding watch and the watch of
the pods it did not steer.
"""

import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.state import InflightState
from kubectl_nettraffic.kube.binding_watch import BindingWatch
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.cluster import namespace_cache
from kubectl_nettraffic.kube.pod_shape import malformed_part
from kubectl_nettraffic.kube.reflector import ListWatchCache
from kubectl_nettraffic.kube.unsteered_pods import UnsteeredPods
from kubectl_nettraffic.measuring.engine import needs_api
from kubectl_nettraffic.measuring.refresher_process import RefresherProcess
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.steering.extender_rules import Filtered as Filtered  # re-exported
from kubectl_nettraffic.steering.extender_rules import filter_nodes, host_scores
from kubectl_nettraffic.steering.pod_bandwidth import expected_bandwidth
from kubectl_nettraffic.steering.steerer import Steerer


@dataclass
class Serving:
    settings: Settings
    scoreboard: Scoreboard
    inflight: InflightState
    steerer: Steerer
    namespaces: ListWatchCache[Mapping[str, str]] | None = None
    bindings: BindingWatch | None = None
    unsteered: UnsteeredPods | None = None

    def extender_filter(
        self,
        pod: Mapping[str, Any],
        names: Iterable[str],
        node_objects: Sequence[Mapping[str, Any]],
        stale: bool,
    ) -> Filtered:
        """The scheduler extender's filter (steering/extender_rules.py)."""
        snapshot = None if stale else self.scoreboard.snapshot
        selector, limits = self.steerer.selector, self.settings.extender
        return filter_nodes(pod, names, node_objects, snapshot, selector, limits)

    def extender_scores(
        self, pod: Mapping[str, Any], names: Iterable[str], stale: bool
    ) -> list[tuple[str, int]]:
        """The scheduler extender's prioritize (steering/extender_rules.py)."""
        snapshot = None if stale else self.scoreboard.snapshot
        if snapshot is None:
            return host_scores(names, None, {}, 0.0)
        # A pod steering cannot read is ranked as one of the default's size.
        bandwidth = default = self.settings.steering.default_pod_bandwidth
        if malformed_part(pod) is None:
            bandwidth = expected_bandwidth(pod, snapshot.learned, default)[0]
        return host_scores(names, snapshot, self.inflight.view(), bandwidth)


def serving_parts(
    settings: Settings, clock: Callable[[], float] = time.time, replica: str | None = None
) -> Serving:
    """Scoreboard, in-flight state and Steerer, wired; nothing started."""
    inflight = InflightState(settings, replica, clock)
    scoreboard = Scoreboard(settings, clock, on_snapshot=inflight.adopt)
    steerer = Steerer(scoreboard, inflight, settings, clock)
    return Serving(settings, scoreboard, inflight, steerer)


def start_serving(settings: Settings) -> Serving:
    """The production wiring, started: run inside the gunicorn worker, after
    the fork, so the refresher process and the watches belong to it."""
    follow = needs_api(settings) and settings.steering.follow_bindings
    # This process's replica id: random, so that pods labelled by an earlier
    # process (whose booking keys would collide) are not selected.
    replica = secrets.token_hex(5) if follow else None
    serving = serving_parts(settings, replica=replica)
    # Refreshes run in a child process, off this process's GIL (refresher_process).
    # Its link thread holds it: nothing here reads it again.
    RefresherProcess(settings, serving.scoreboard).start()
    if needs_api(settings):
        api = api_client(settings.kubeconfig)
        serving.namespaces = namespace_cache(api).start()
        if replica is not None:
            # A pod's traffic is fully in the measurements this long after its creation.
            horizon = settings.steering.pod_startup + settings.prometheus.window
            serving.bindings = BindingWatch(api, serving.inflight, replica, horizon)
            serving.bindings.start()
            # The pods no replica steered count in their workloads' spread too.
            serving.unsteered = UnsteeredPods(api, serving.inflight)
            serving.unsteered.start()
            # Once both listed, the peers' pull reads where the pods run now.
            serving.inflight.follow_places(serving.bindings.synced, serving.unsteered.synced)
    return serving
