"""One admission decision: skip rules, candidate choice, burst booking, patch.

Glue between the scoreboard (live state) and placement (pure rules); the
webhook's /mutate and the placement benchmark both call ``Steerer.decide``.
"""

import itertools
import logging
import time
from collections.abc import Callable, Mapping
from typing import NamedTuple

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.placement import (
    BANDWIDTH_SOURCE,
    BOOKED_BANDWIDTH,
    BOOKING,
    PREFERRED_NODES,
    SCORED_AT,
    SCORES,
    SKIPPED,
    SOURCE,
    STEERED_BY,
    CandidateHeap,
    JsonPatch,
    PatchCheckFailed,
    Pod,
    Preference,
    affinity_patch,
    annotation_ops,
    apply_and_check,
    choose_nodes,
    expected_bandwidth,
    untouchable_reason,
)
from kubectl_nettraffic.scoreboard import Scoreboard, Snapshot
from kubectl_nettraffic.scoreview import rfc3339

log = logging.getLogger(__name__)


class Decision(NamedTuple):  # a tuple: one is made on every admission
    patch: JsonPatch | None  # None: allow unchanged
    preferences: tuple[Preference, ...] = ()
    skip: str | None = None  # reason code when not steered
    warnings: tuple[str, ...] = ()
    booking: int = 0  # the pod's key in the in-flight ledger; 0: not booked


class Steerer:
    """``ledger_label``: when given, each booked pod is labelled with it
    (``nettraffic.io/steered-by``) and annotated with its booking's key, so a
    BindingWatch can move the booking to the node the pod is bound to."""

    def __init__(
        self,
        scoreboard: Scoreboard,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        ledger_label: str | None = None,
    ) -> None:
        self.scoreboard = scoreboard
        self.settings = settings
        self.clock = clock
        self.ledger_label = ledger_label
        self._keys = itertools.count(1)
        # Kept per snapshot and renewed when it changes (_adopt_latest): its
        # live candidate order, the ledger's in-flight view, when it turns
        # stale, and its RFC 3339 time. Asked for afresh on every admission,
        # they cost about 2 us with cold caches (throwaway timing).
        self._snapshot: Snapshot | None = None
        self._live: CandidateHeap | None = None
        self._inflight: Mapping[str, tuple[float, int]] = {}
        self._stale_after = float("-inf")
        self._scored_at = ""

    def _adopt_latest(self) -> None:
        """Renew what is kept per snapshot for the scoreboard's latest; under the steering lock."""
        snapshot = self.scoreboard.snapshot
        if snapshot is None or snapshot is self._snapshot:
            return  # (another admission adopted it first)
        # The ledger's view is live: bookings update it in place until a newer
        # measurement, which comes with the next snapshot, replaces it.
        self._inflight = self.scoreboard.ledger.view(snapshot.generated_at)
        self._live = CandidateHeap(snapshot.candidates, self._inflight)
        self._stale_after = self.scoreboard.stale_after(snapshot)
        self._scored_at = rfc3339(snapshot.generated_at)
        self._snapshot = snapshot

    def _skipped(self, pod: Pod, reason: str, warning: str) -> Decision:
        # Soft skips are written on the pod so `kubectl nettraffic explain` can say why.
        patch = annotation_ops(pod, {SKIPPED: reason})
        try:
            apply_and_check(pod, patch)
        except PatchCheckFailed:
            patch = []
        return Decision(patch=patch or None, skip=reason, warnings=(warning,))

    def decide(
        self, pod: Pod, namespace_labels: Mapping[str, str] | None, dry_run: bool
    ) -> Decision:
        steering = self.settings.steering
        reason = untouchable_reason(pod, namespace_labels, steering.scheduler_names)
        if reason:
            return Decision(patch=None, skip=reason)
        snapshot = self.scoreboard.snapshot
        if snapshot is None:
            return self._skipped(
                pod,
                "no-snapshot",
                "nettraffic: no traffic data yet; node choice left to the scheduler",
            )
        now = self.clock()
        if snapshot is not self._snapshot:
            with self.scoreboard.steering_lock:
                self._adopt_latest()
        if now > self._stale_after:
            return self._skipped(
                pod,
                "stale-snapshot",
                f"nettraffic: traffic data is {snapshot.age(now):.0f}s old; "
                "node choice left to the scheduler",
            )
        bandwidth, bandwidth_source, warning = expected_bandwidth(
            pod, snapshot.learned, steering.default_pod_bandwidth
        )
        warnings = (warning,) if warning else ()
        with self.scoreboard.steering_lock:
            # The latest adopted, with which the heap and the view below agree.
            snapshot = self._snapshot or snapshot
            preferences = choose_nodes(
                snapshot.candidates,
                snapshot.tainted,
                snapshot.nodes,
                pod,
                self.scoreboard.selector,
                self._inflight,
                steering.preferred_nodes,
                self._live,
            )
            if not preferences:
                decision = self._skipped(
                    pod, "no-candidate", "nettraffic: no eligible node fits this pod's constraints"
                )
                return Decision(
                    decision.patch, skip=decision.skip, warnings=warnings + decision.warnings
                )
            names, scores = [], []
            for p in preferences:
                score = round(p.score)  # in-flight load can take it below 0
                names.append(p.node)
                scores.append(f"{p.node}={0 if score < 0 else 100 if score > 100 else score}")
            annotations = {
                PREFERRED_NODES: ",".join(names),
                SCORED_AT: self._scored_at,
                SOURCE: snapshot.source,
                SCORES: ",".join(scores),
                BOOKED_BANDWIDTH: f"{bandwidth:.0f}",
                BANDWIDTH_SOURCE: bandwidth_source,
            }
            # sideEffects None: a dry run books nothing.
            key = next(self._keys) if bandwidth > 0 and not dry_run else 0
            labels = None
            if key and self.ledger_label:
                annotations[BOOKING] = str(key)
                labels = {STEERED_BY: self.ledger_label}
            patch = affinity_patch(pod, preferences, annotations, labels, steering.traffic_tiers)
            try:
                apply_and_check(pod, patch)
            except PatchCheckFailed as error:
                log.warning("patch check failed, allowing unchanged: %s", error)
                return Decision(
                    patch=None,
                    skip="patch-check-failed",
                    warnings=(*warnings, f"nettraffic: patch not applied ({error})"),
                )
            if key:
                self.scoreboard.ledger.add(preferences[0].node, bandwidth, now, key)
                if self._live is not None:
                    self._live.book(preferences[0].node, bandwidth)
        return Decision(patch, tuple(preferences), None, warnings, key)

    def is_pending(self, key: int) -> bool:
        """Whether the booking ``key`` may still move or drop."""
        return self.scoreboard.ledger.is_pending(key)

    def rebook(self, key: int, node: str) -> str | None:
        """The pod booked as ``key`` was bound to ``node``: its booking moves
        there, once. "moved", "kept" (it was booked there), or None when
        there was nothing to move."""
        with self.scoreboard.steering_lock:
            moved = self.scoreboard.ledger.move(key, node)
            if moved is None:
                return None
            left, unseen = moved
            if left == node:
                return "kept"
            if self._live is not None:
                self._live.book(left, -unseen)
                self._live.book(node, unseen)
            return "moved"

    def release(self, key: int) -> bool:
        """The pod booked as ``key`` will not run (deleted or failed unbound):
        its booking is dropped. False when there was nothing to drop."""
        with self.scoreboard.steering_lock:
            dropped = self.scoreboard.ledger.drop(key)
            if dropped is None:
                return False
            if self._live is not None:
                self._live.book(dropped[0], -dropped[1])
            return True
