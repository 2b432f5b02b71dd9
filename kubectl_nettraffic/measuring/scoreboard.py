"""The latest published snapshot of the scores, and what the last refresh said.

A refresh is ``Measurer.measure`` (measurement.py) then ``Scoreboard.record``.
Readers (admissions, /scores, the extender) only ever read the current
snapshot reference, which ``record`` swaps in one assignment; they never
wait for Prometheus or the API server. Whatever must follow each new
snapshot (the in-flight state, inflight/state.py) subscribes with ``on_snapshot``.

A failure there is a bug of ours, and it must not cost what the refresher
holds (learned history, the tier labels' Lease): ``record`` logs it, counts
it (``follow_failures``), keeps the previous snapshot published, and the
next refresh's snapshot is tried again.
"""

import logging
import time
from collections.abc import Callable

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.measuring.measurement import RefreshOutcome, Snapshot
from kubectl_nettraffic.scoring.tiers import TierLabelStatus

log = logging.getLogger(__name__)


class Scoreboard:
    def __init__(
        self,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        on_snapshot: Callable[[Snapshot], None] | None = None,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.on_snapshot = on_snapshot
        self.source_failures: dict[str, int] = {"prometheus": 0, "metrics-server": 0, "nodes": 0}
        self.last_errors: tuple[str, ...] = ()  # of the latest refresh, for the CLI
        self.last_refresh_seconds = 0.0
        self.tier_labels: TierLabelStatus | None = None
        self.follow_failures = 0  # snapshots on_snapshot failed on, so not published
        self._snapshot: Snapshot | None = None

    @property
    def snapshot(self) -> Snapshot | None:
        return self._snapshot

    def is_stale(self, snapshot: Snapshot | None) -> bool:
        return snapshot is None or self.clock() > self.stale_after(snapshot)

    def stale_after(self, snapshot: Snapshot) -> float:
        """When ``snapshot`` turns stale (a clock() time)."""
        return snapshot.generated_at + self.settings.refresh.max_staleness

    def record(self, outcome: RefreshOutcome) -> Snapshot | None:
        """Publish what a refresh measured: its snapshot, if it has one, and its failures."""
        for source in outcome.failed_sources:
            self.source_failures[source] = self.source_failures.get(source, 0) + 1
        self.last_errors = outcome.errors
        self.last_refresh_seconds = outcome.seconds
        if outcome.tier_labels is not None:
            self.tier_labels = outcome.tier_labels
        snapshot = outcome.snapshot
        if snapshot is None:
            return None
        if self.on_snapshot is not None:
            # Followed before it is published: an admission that found it
            # first would do the following itself, every other one waiting.
            try:
                self.on_snapshot(snapshot)
            except Exception:
                self.follow_failures += 1
                log.exception(
                    "following the snapshot of %s failed; the previous one stays published",
                    snapshot.generated_at,
                )
                return None
        self._snapshot = snapshot  # one reference swap: readers see old or new
        return snapshot
