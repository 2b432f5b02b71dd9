"""One admission decision: skip rules, candidate choice, burst booking, patch.

Glue between the published scores (scoreboard.py), the pods steered since
(inflight/state.py) and placement (pure rules); the webhook's /mutate and the
placement benchmark both call ``Steerer.decide``.
"""

import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import NamedTuple

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.state import Admission, InflightState
from kubectl_nettraffic.kube.pod_shape import malformed_part
from kubectl_nettraffic.kube.pods import (
    BANDWIDTH_SOURCE,
    BOOKED_BANDWIDTH,
    BOOKING,
    PEER_PULL,
    PREFER_NO_EVICTION,
    PREFERRED_NODES,
    SCORED_AT,
    SCORES,
    SKIPPED,
    SOURCE,
    STEERED_BY,
    JsonPatch,
    Pod,
    untouchable_reason,
)
from kubectl_nettraffic.kube.workloads import Workload, pod_template, pod_workload
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.scoring.placement import Preference, Ranked, Weighed, weighed
from kubectl_nettraffic.scoring.savings import MIN_SAVING, FieldCost, SpreadPick
from kubectl_nettraffic.scoring.scheduler_sample import scores_a_sample
from kubectl_nettraffic.scoring.spread import SpreadRules
from kubectl_nettraffic.scoring.tier_weights import TierCosts
from kubectl_nettraffic.steering.affinity_patch import affinity_patch, annotation_ops, patch_text
from kubectl_nettraffic.steering.patch_check import PatchCheckFailed, apply_and_check
from kubectl_nettraffic.steering.peer_pull import PodPull, PullPlans
from kubectl_nettraffic.steering.pod_bandwidth import expected_bandwidth, light_for_every_link
from kubectl_nettraffic.units import rfc3339

log = logging.getLogger(__name__)
# Where a pod's own size comes from (else the cluster-wide figure or the default).
OWN_SIZE = ("annotation", "workload")


def _scores_text(preferences: Sequence[Preference]) -> str:
    """``node=score,...``, each live score rounded into 0..100 (in-flight load
    can take it below 0)."""
    return ",".join(f"{p.node}={min(100, max(0, round(p.score)))}" for p in preferences)


class Decision(NamedTuple):  # a tuple: one is made on every admission
    patch: JsonPatch | None  # None: allow unchanged
    preferences: tuple[Preference, ...] = ()
    skip: str | None = None  # reason code when not steered
    warnings: tuple[str, ...] = ()
    booking_key: int = 0  # the key of the pod's booking (inflight/bookings.py); 0: not booked

    def patch_json(self) -> str | None:
        """The patch as the compact JSON the admission answer carries."""
        return None if self.patch is None else patch_text(self.patch)


class PerSnapshot(NamedTuple):
    """What every admission by one snapshot needs, worked out once."""

    snapshot: Snapshot
    stale_after: float  # when it turns stale
    scored_at: str  # its time, RFC 3339
    slowest_link: float  # the slowest eligible link, bytes/s; 0: none known
    field: FieldCost  # what a pod costs the candidates kube-scheduler would pick from
    # ... per traffic tier, as the nodes carry their labels; None: steering.trafficTiers off
    tiers: TierCosts | None
    # No link busy enough to cost a pod of the default size a point on
    # average: a pod of unknown size keeps its zones even (SpreadRules.balanced).
    calm: bool
    # kube-scheduler scores a sample of the nodes (scoring/scheduler_sample.py).
    sampled: bool


def likely_node(preferences: Sequence[Preference], full: AbstractSet[str]) -> str:
    """Where the pod most likely runs, to book it there: its heaviest term;
    without terms, the best node its spread has not filled (kube-scheduler's
    own spread passes over a full one), else the best."""
    terms = [p for p in preferences if p.weight]
    if terms:
        return max(terms, key=lambda p: p.weight).node
    return next((p.node for p in preferences if p.node not in full), preferences[0].node)


class Steerer:
    """Decides each admission from the published scores (``scoreboard``) and
    the pods steered since (``inflight``).

    When the in-flight state has a replica id, each booked pod is labelled
    with it (``nettraffic.io/steered-by``) and annotated with its booking's
    key, so a BindingWatch can move the booking to the node the pod is
    bound to."""

    def __init__(
        self,
        scoreboard: Scoreboard,
        inflight: InflightState,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.scoreboard = scoreboard
        self.inflight = inflight
        self.settings = settings
        self.clock = clock
        self.selector = parse_selector(settings.nodes.selector)
        # Of the latest snapshot seen, renewed when it changes; one tuple, so
        # concurrent admissions swap it whole.
        self._derived: PerSnapshot | None = None
        # The pull of the latest conversations (None: no flow source, or
        # none read yet); changed under the in-flight lock only.
        self._peers: PullPlans | None = None
        # Pods steered otherwise than asked, by note (exported on /metrics):
        # no-gain (neither a node nor a tier saved a point: no term),
        # spread-relaxed (the spread left no node the pod fits),
        # spread-unknown-key.
        self.notes: Counter[str] = Counter()

    def _derived_of(self, snapshot: Snapshot) -> PerSnapshot:
        """What every admission by ``snapshot`` needs, worked out on its first."""
        derived = self._derived
        if derived is None or derived.snapshot is not snapshot:
            steering = self.settings.steering
            speeds = [c.link_speed for c in snapshot.candidates if c.link_speed]
            field = FieldCost(snapshot.candidates, steering.busy_above)
            derived = self._derived = PerSnapshot(
                snapshot,
                self.scoreboard.stale_after(snapshot),
                rfc3339(snapshot.generated_at),
                min(speeds) if speeds else 0.0,
                field,
                TierCosts(snapshot.candidates, snapshot.nodes, steering.busy_above)
                if steering.traffic_tiers
                else None,
                field.mean(steering.default_pod_bandwidth) < MIN_SAVING,
                scores_a_sample(len(snapshot.nodes), steering.percentage_of_nodes_to_score),
            )
        return derived

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
        if reason == "malformed-pod":
            return Decision(
                patch=None,
                skip=reason,
                warnings=(f"nettraffic: {malformed_part(pod)}; pod not steered",),
            )
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
        if now > self._derived_of(snapshot).stale_after:
            return self._skipped(
                pod,
                "stale-snapshot",
                f"nettraffic: traffic data is {snapshot.age(now):.0f}s old; "
                "node choice left to the scheduler",
            )
        workload, template = pod_workload(pod), pod_template(pod)
        spread = SpreadRules.of(pod, steering.zone_max_skew, steering.hostname_max_skew)
        if spread.unknown:
            self.notes["spread-unknown-key"] += 1
        # The snapshot the in-flight state follows (this one or a newer one)
        # is the one this decision reads throughout: candidates and learned figures.
        with self.inflight.admission(snapshot) as admission:
            return self._steer(pod, admission, (workload, template), spread, now, dry_run)

    def _steer(
        self,
        pod: Pod,
        admission: Admission,
        owners: tuple[Workload | None, Workload | None],
        spread: SpreadRules,
        now: float,
        dry_run: bool,
    ) -> Decision:
        """The choice, the patch and the booking, in one in-flight
        transaction; ``owners``: the pod's workload and its ReplicaSet."""
        workload, template = owners
        steering, snapshot = self.settings.steering, admission.snapshot
        # Read once: its booking's key (a dry run books nothing:
        # sideEffects None), and the live views its peers' pull reads.
        key = 0 if dry_run else admission.new_key()
        unseen, live = admission.unseen, admission.live_places()
        in_flight = admission.in_flight(workload) if workload is not None else {}
        # Its burst: its workload's pods in flight, itself included.
        burst = 1 + (admission.pods_in_flight(workload) if workload is not None else 0)
        bandwidth, bandwidth_source, warning = expected_bandwidth(
            pod, snapshot.learned, steering.default_pod_bandwidth
        )
        warnings = (warning,) if warning else ()
        if bandwidth <= 0:
            key = 0  # nothing to book
        # Too old, they pull no more (peers.maxAgePasses).
        conversations = snapshot.learned.pulling if snapshot.learned else None
        # Booked at the default, nothing learned yet: its burst spreads
        # (ranking/handicaps.py), steered in full, its zones kept even in a
        # calm cluster (as kube-scheduler alone keeps them); under load, as
        # its spread says.
        unlearned = bandwidth_source == "default"
        derived = self._derived_of(snapshot)
        if unlearned and derived.calm:
            spread = spread.balanced()
        pull = None
        if conversations is not None and workload is not None:
            pull = self._plans_of(conversations, snapshot).pod_pull(
                workload,
                bandwidth,
                unseen,
                in_flight,
                None if template is None else template.name,
                live,
            )
        ranked, relaxed, full, barred, crowded = admission.choose(
            pod,
            self.selector,
            steering.preferred_nodes,
            bandwidth,
            now,
            workload,
            unlearned,
            pull,
            spread,
            template if spread.per_template else None,
        )
        if not ranked:
            return self._no_candidate(pod, warnings)
        if relaxed:
            self.notes["spread-relaxed"] += 1
        # Under the defaults, a full node yields where it saves a point over
        # where kube-scheduler's own spread would send the pod.
        spread_pick = None
        if crowded is not None and spread.defaults:
            spread_pick = derived.field.spread_pick(bandwidth, crowded)
        preferences, tier_terms, left_out = self._weighed(
            ranked,
            derived,
            bandwidth,
            pull,
            burst,
            unlearned,
            full,
            spread_pick,
            bandwidth_source in OWN_SIZE,
            unseen,
        )
        terms = [p for p in preferences if p.weight]
        if not terms and not tier_terms:
            self.notes["no-gain"] += 1
        names = [p.node for p in preferences]
        annotations = {
            PREFERRED_NODES: ",".join(names),
            SCORED_AT: derived.scored_at,
            SOURCE: snapshot.source,
            SCORES: _scores_text(preferences),
            BOOKED_BANDWIDTH: f"{bandwidth:.0f}",
            BANDWIDTH_SOURCE: bandwidth_source,
        }
        pulled = "" if pull is None else pull.annotation(names)
        if pulled:
            annotations[PEER_PULL] = pulled
        # Where it most likely runs: booked there, and its peers' zone term
        # follows that node (a full node ranked first may have no term).
        booked_on = likely_node(preferences, full)
        zone_term = None if pull is None or not terms else pull.zone_term(booked_on)
        # Off by default: then the admission pays one attribute read for it.
        share = steering.prefer_no_eviction_below
        if share and light_for_every_link(bandwidth, bandwidth_source, derived.slowest_link, share):
            annotations[PREFER_NO_EVICTION] = "true"
        labels = None
        replica = self.inflight.replica
        if key and replica:
            annotations[BOOKING] = str(key)
            labels = {STEERED_BY: replica}
        # The tier terms keep pods off hot links where kube-scheduler samples
        # none of the node terms; outside the zones the spread kept the node
        # terms out of (on the zone copy the tier labeller writes), and off
        # the nodes booked past a point since the measurement.
        patch = affinity_patch(
            pod, terms, annotations, labels, tier_terms, zone_term, barred, left_out
        )
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
            # At its whole expected bytes: what its peers keep on the node is
            # for the measurement to show, wherever kube-scheduler binds it.
            admission.book(booked_on, bandwidth, now, key, workload, unlearned, template)
        return Decision(patch, tuple(preferences), None, warnings, key)

    def _no_candidate(self, pod: Pod, warnings: tuple[str, ...]) -> Decision:
        decision = self._skipped(
            pod, "no-candidate", "nettraffic: no eligible node fits this pod's constraints"
        )
        return Decision(decision.patch, skip=decision.skip, warnings=warnings + decision.warnings)

    def _weighed(
        self,
        ranked: list[Ranked],
        derived: PerSnapshot,
        bandwidth: float,
        pull: PodPull | None,
        burst: int,
        size_unknown: bool,
        full: frozenset[str],
        spread_pick: SpreadPick | None,
        own_size: bool,
        unseen: Mapping[str, tuple[float, int]],
    ) -> Weighed:
        """The chosen nodes' terms and the tier terms (scoring/placement.py's
        ``weighed``: under tier terms kube-scheduler picks among the cheapest
        tiers, so a node saves only what it saves over those); a node its
        workload's spread has filled gets none, but under the cluster's
        default spread where it saves a point over the pick of
        kube-scheduler's own spread (``spread_pick``); where kube-scheduler
        scores a sample, the nodes beside the pod's peers are graded by their
        score gap alone; the tier terms leave out the nodes booked past a
        point since the measurement (``unseen``)."""
        return weighed(
            ranked,
            derived.field,
            derived.tiers,
            bandwidth,
            self.settings.steering.busy_above,
            None if pull is None else pull.pulled,
            burst=burst,
            size_unknown=size_unknown,
            full=full,
            spread_pick=spread_pick,
            own_size=own_size,
            beside_peers=pull.beside_peers()
            if pull is not None and derived.sampled
            else frozenset(),
            unseen=unseen,
        )

    def _plans_of(self, conversations: Conversations, snapshot: Snapshot) -> PullPlans:
        """The pull of the conversations the snapshot carries, renewed when
        they or the nodes change. Under the in-flight lock (an admission)."""
        plans = self._peers
        if (
            plans is None
            or plans.conversations is not conversations
            or plans.nodes is not snapshot.nodes
        ):
            plans = self._peers = PullPlans(conversations, snapshot.nodes, self.settings.peers)
        return plans
