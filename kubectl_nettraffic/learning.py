"""The learner on a thread of its own: every ``learning.interval`` (or less
often, when its query is slow: ``learning.prometheusShare``) it reads
per-pod traffic (sources/pod_traffic.py) and updates the per-workload
figures (workload_bandwidth.py); the scoreboard puts the latest figures in
each snapshot. Its query is large in large clusters (bench.learning), so it
never runs inside a refresh and never delays the scores. A failed round is
logged and costs that round only: what was learned stays.
"""

import logging
import threading
import time
from collections.abc import Callable

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.sources.pod_traffic import PodTrafficReport
from kubectl_nettraffic.workload_bandwidth import BandwidthLearner, LearnedBandwidth

log = logging.getLogger(__name__)


class BandwidthLearning:
    """``fetch`` gives one round's samples (PodTrafficSource.samples in the webhook)."""

    def __init__(self, settings: Settings, fetch: Callable[[], PodTrafficReport]) -> None:
        self.interval = settings.learning.interval
        self.prometheus_share = settings.learning.prometheus_share
        self.learner = BandwidthLearner.for_settings(
            settings.learning, settings.prometheus.direction
        )
        self._fetch = fetch
        self._latest: LearnedBandwidth | None = None
        self.missing: tuple[str, ...] = ()
        self.last_error: str | None = None
        self.last_round_seconds = 0.0
        self._stop = threading.Event()

    def latest(self) -> LearnedBandwidth | None:
        return self._latest

    def update(self) -> None:
        """One round: read, learn, publish (a reference swap readers see whole)."""
        started = time.perf_counter()
        try:
            report = self._fetch()
        except NetTrafficError as error:
            self.last_error = str(error)
            log.warning("learning: per-pod traffic unavailable this round: %s", error)
            return
        finally:
            self.last_round_seconds = time.perf_counter() - started
        self.last_error = None
        self.missing = report.missing
        if report.missing:
            return
        self.learner.observe(report.samples, report.evaluated_at)
        self._latest = self.learner.learned(report.evaluated_at)

    def start(self) -> "BandwidthLearning":
        threading.Thread(target=self._run, name="learning", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def pause(self) -> float:
        """Seconds until the next round: the interval, or longer when the last
        query's time would take more than learning.prometheusShare of a
        Prometheus core (its query's wall time stands for Prometheus's CPU:
        the evaluation runs on one core for most of it)."""
        return max(self.interval, self.last_round_seconds / self.prometheus_share)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.update()
            self._stop.wait(self.pause())
