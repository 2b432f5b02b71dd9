"""The webhook's serving objects, built in one place; ``create_app`` receives them.

``serving_parts`` wires the published scores, the in-flight state and the
Steerer, and starts nothing: tests and benchmarks feed its scoreboard by
hand. ``start_serving`` adds what production runs beside them: the
refresher process that feeds the scoreboard, and, where the settings read
the Kubernetes API, the namespace cache and the binding watch.
"""

import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.bindings import BindingWatch
from kubectl_nettraffic.inflight.state import InflightState
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.cluster import namespace_cache
from kubectl_nettraffic.kube.reflector import ListWatchCache
from kubectl_nettraffic.measuring.engine import needs_api
from kubectl_nettraffic.measuring.refresher_process import RefresherProcess
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.steering.steerer import Steerer


@dataclass
class Serving:
    settings: Settings
    scoreboard: Scoreboard
    inflight: InflightState
    steerer: Steerer
    namespaces: ListWatchCache[Mapping[str, str]] | None = None
    bindings: BindingWatch | None = None
    refresher: RefresherProcess | None = None


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
    serving.refresher = RefresherProcess(settings, serving.scoreboard).start()
    if needs_api(settings):
        api = api_client(settings.kubeconfig)
        serving.namespaces = namespace_cache(api).start()
        if replica is not None:
            # A pod's traffic is fully in the measurements this long after its creation.
            horizon = settings.steering.pod_startup + settings.prometheus.window
            serving.bindings = BindingWatch(api, serving.inflight, replica, horizon)
            serving.bindings.start()
    return serving
