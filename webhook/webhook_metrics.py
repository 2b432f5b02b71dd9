"""The catalogue of the webhook's own metrics (/metrics): every series, its
help text and where its value is read from."""

from collections.abc import Callable, Mapping
from typing import Any

from kubectl_nettraffic.measuring.scoreview import (
    learner_progress,
    pairs_age,
    peer_bytes_by_place,
    peer_read_failures,
    peer_routing,
    peer_routing_notes,
)
from kubectl_nettraffic.serving import Serving
from webhook.front import connections_closed_counter
from webhook.metrics import ADMISSION_BUCKETS, Counter, Gauge, OutcomeHistogram, Reading, Registry
from webhook.process_metrics import ProcessMetrics
from webhook.tls import CertReloader

MUTATE = "/mutate"


class WebhookMetrics:
    def __init__(self, serving: Serving, cert: CertReloader) -> None:
        self.registry = Registry()
        add = self.registry.add
        # Answers are counted by path and code in RequestCounter, except those of
        # /mutate (SELF_COUNTED): its 200s are the admissions below, its errors
        # are counted by the app's error handlers. Both meet in one reading.
        self.requests = Counter("nettraffic_http_requests_total", "", ("path", "code"))
        add(
            Reading(
                "nettraffic_http_requests_total",
                "HTTP requests by path and status code.",
                "counter",
                ("path", "code"),
                self._requests_by_path,
            )
        )
        # One observation per admission: its latency and its outcome.
        self.admissions = add(
            OutcomeHistogram(
                "nettraffic_admission_duration_seconds",
                "Time to answer an AdmissionReview, in the API server's webhook buckets.",
                ADMISSION_BUCKETS,
            )
        )
        add(
            Reading(
                "nettraffic_admission_reviews_total",
                "AdmissionReviews by outcome.",
                "counter",
                ("outcome",),
                self.admissions.counts,
            )
        )
        add(
            Reading(
                "nettraffic_mutations_total",
                "Pods given preferred nodes.",
                "counter",
                (),
                lambda: {(): self.admissions.counts().get(("mutated",), 0.0)},
            )
        )
        self.skips = add(
            Counter("nettraffic_skips_total", "Pods not steered, by reason.", ("reason",))
        )
        steerer = serving.steerer
        add(
            Reading(
                "nettraffic_choice_notes_total",
                "Pods steered otherwise than asked, by note: no-gain (neither a chosen "
                "node nor a tier saved the pod a point: no term), spread-relaxed (the workload's spread "
                "left no node the pod fits), spread-unknown-key (a spread constraint "
                "on a key left to kube-scheduler).",
                "counter",
                ("note",),
                # A copy in one C call: admissions add to it meanwhile.
                lambda: _labelled(dict(steerer.notes)),
            )
        )
        self.extender = add(
            Counter(
                "nettraffic_extender_requests_total",
                "Extender calls by verb and outcome.",
                ("verb", "outcome"),
            )
        )
        if serving.bindings is not None:
            self._add_binding_watch(serving)
        self._add_state(serving, cert)

    def _add_binding_watch(self, serving: Serving) -> None:
        add = self.registry.add
        watch, inflight = serving.bindings, serving.inflight
        assert watch is not None
        add(
            Reading(
                "nettraffic_bookings_followed_total",
                "Bookings of steered pods settled by the binding watch: moved to "
                "the node bound, kept (bound where booked), dropped (gone unbound), "
                "seen (another replica's pod, booked here), placed (a pod too old to "
                "book, counted by its spread: another replica's, or this one's shown "
                "bound after its booking was measured), gone (terminating, finished or "
                "deleted after its binding).",
                "counter",
                ("outcome",),
                lambda: _labelled(watch.counts()),
            )
        )
        add(
            Reading(
                "nettraffic_binding_events_ignored_total",
                "Events of steered pods the binding watch let pass without a change: "
                "no-booking (none pending here: moved or dropped already, measured, "
                "or never booked), too-old (another replica's pod the measurements "
                "show), unusable (another replica's pod whose annotations make no booking).",
                "counter",
                ("reason",),
                lambda: _labelled(watch.ignored()),
            )
        )
        unsteered = serving.unsteered
        if unsteered is not None:
            add(
                Gauge(
                    "nettraffic_unsteered_pods_counted",
                    "Bound pods no replica steered (those that ran before the install, "
                    "say) that their workloads' spread counts now.",
                    lambda: float(unsteered.placed),
                )
            )
        add(
            Gauge(
                "nettraffic_binding_watch_delay_seconds",
                "Moving average of the time from this replica's admission of a pod to "
                "its binding watch showing it (1 s for a pod not shown within 1 s): "
                "how late the replicas see each other's pods.",
                lambda: inflight.watch_delay,
            )
        )
        add(
            Gauge(
                "nettraffic_bindings_off_zone_ratio",
                "Moving average, over about the last 200 bindings the watch showed, of "
                "the share outside the zone the pod was booked in: while a workload's "
                "pods are not shown bound, its zones are kept that much further within "
                "their skew.",
                lambda: inflight.off_zone_share,
            )
        )
        add(
            Reading(
                "nettraffic_admitted_pods_never_shown_total",
                "Pods admitted and booked here that the binding watch had not shown "
                "when their booking was measured: never created (a ResourceQuota or "
                "another admission webhook refused them), so their workload's spread "
                "counts them no more.",
                "counter",
                (),
                lambda: {(): float(inflight.never_shown)},
            )
        )
        add(
            Reading(
                "nettraffic_declined_nodes_total",
                "Nodes declined: a pod booked on them was bound elsewhere, so they "
                "lost their first place until the next snapshot (each counted once "
                "per snapshot).",
                "counter",
                (),
                lambda: {(): float(inflight.declined_total)},
            )
        )

    def _add_state(self, serving: Serving, cert: CertReloader) -> None:
        """What is read at scrape time: tier labels, certificate, snapshot, refresh."""
        add, scoreboard = self.registry.add, serving.scoreboard
        add(
            Gauge(
                "nettraffic_tier_labels_leader",
                "1 while this replica holds the Lease and writes the traffic-tier node labels.",
                lambda: float(scoreboard.tier_labels.leader) if scoreboard.tier_labels else None,
            )
        )
        add(
            Reading(
                "nettraffic_tier_label_writes_total",
                "Traffic-tier node label PATCHes by outcome: written, refused (RBAC or "
                "the ValidatingAdmissionPolicy), failed.",
                "counter",
                ("outcome",),
                lambda: {
                    (k,): float(v)
                    for k, v in (
                        scoreboard.tier_labels.writes if scoreboard.tier_labels else {}
                    ).items()
                },
            )
        )
        # The worker's front counts into it (front.py, FrontWorker.load_wsgi).
        self.connections_closed = add(connections_closed_counter())
        add(ProcessMetrics())
        add(
            Gauge(
                "nettraffic_serving_certificate_expiry_timestamp_seconds",
                "When the certificate served to new connections expires (Unix time).",
                lambda: cert.served_not_after,
            )
        )
        now = scoreboard.clock
        add(
            Gauge(
                "nettraffic_snapshot_age_seconds",
                "Age of the data behind the current scores.",
                lambda: scoreboard.snapshot.age(now()) if scoreboard.snapshot else None,
            )
        )
        add(
            Gauge(
                "nettraffic_snapshot_stale",
                "1 when the scores are older than refresh.maxStaleness.",
                lambda: float(scoreboard.is_stale(scoreboard.snapshot)),
            )
        )
        add(
            Gauge(
                "nettraffic_refresh_duration_seconds",
                "Duration of the last refresh.",
                lambda: scoreboard.last_refresh_seconds,
            )
        )
        add(
            Gauge(
                "nettraffic_scored_nodes",
                "Nodes in the current snapshot.",
                lambda: float(len(scoreboard.snapshot.scores)) if scoreboard.snapshot else None,
            )
        )
        add(
            Reading(
                "nettraffic_snapshot_follow_failures_total",
                "Snapshots the in-flight state failed to follow (a bug: see the log); the previous snapshot stayed published.",
                "counter",
                (),
                lambda: {(): float(scoreboard.follow_failures)},
            )
        )
        add(
            Reading(
                "nettraffic_source_failures_total",
                "Failed reads per source.",
                "counter",
                ("source",),
                lambda: _labelled(scoreboard.source_failures),
            )
        )
        self._add_learner(serving)
        self._add_peers(serving)

    def _add_learner(self, serving: Serving) -> None:
        """What the learner read so far: its rounds, their query time (its
        budget), its passes and the pass under way; nothing before it published."""
        add = self.registry.add

        def field(name: str) -> Callable[[], Any]:
            """A field of the learner's progress, read at scrape time; None
            before it published."""
            return lambda: getattr(learner_progress(serving.scoreboard.snapshot), name, None)

        rounds, seconds, passes = field("rounds"), field("query_seconds"), field("passes")
        slices, slices_read = field("slices"), field("slices_read")
        add(
            Reading(
                "nettraffic_learner_rounds_total",
                "The learner's rounds by kind: slice (a slice of the pods; the first pass's "
                "pod count too), young (the pods of new workloads), peers (the pairs, once a "
                "pass).",
                "counter",
                ("round",),
                lambda: _labelled(rounds() or {}),
            )
        )
        add(
            Reading(
                "nettraffic_learner_query_seconds_total",
                "Query time of the learner's rounds by kind, wall-clock, from sending a query "
                "to its parsed answer: what learning.prometheusShare holds to its share of "
                "any minute.",
                "counter",
                ("round",),
                lambda: _labelled(seconds() or {}),
            )
        )
        add(
            Reading(
                "nettraffic_learner_passes_total",
                "Passes of the learner over every pod, finished; the pairs are read after each.",
                "counter",
                (),
                lambda: {} if passes() is None else {(): float(passes())},
            )
        )
        add(
            Gauge(
                "nettraffic_learner_pass_slices",
                "Slices of the pods in the learner's pass under way.",
                slices,
            )
        )
        add(
            Gauge(
                "nettraffic_learner_pass_slices_read",
                "Slices of the pass under way read so far.",
                slices_read,
            )
        )

    def _add_peers(self, serving: Serving) -> None:
        """The conversations between workloads: their bytes, their age and the failed reads."""
        add = self.registry.add
        self.serving = serving
        self._peer_key: tuple[object, object] | None = None
        self._peer_totals: dict[tuple[str, ...], float] = {}
        add(
            Reading(
                "nettraffic_peer_bytes_per_second",
                "Bytes/s between workloads that talk (peers.source), by where they go now: "
                "same-node, same-zone, cross-zone, unknown-zone.",
                "gauge",
                ("where",),
                self._peer_bytes,
            )
        )
        add(
            Reading(
                "nettraffic_peer_series_ignored",
                "Flow series the last pair read left out, by reason.",
                "gauge",
                ("reason",),
                self._peer_ignored,
            )
        )
        add(
            Reading(
                "nettraffic_peer_routed_workloads",
                "Called workloads whose Services keep their callers near, by routing: "
                "zone (PreferSameZone, PreferClose, topology hints), node (PreferSameNode, "
                "internalTrafficPolicy Local); the others spread (peers.routing).",
                "gauge",
                ("routing",),
                lambda: _labelled(peer_routing(serving.scoreboard.snapshot)),
            )
        )
        add(
            Reading(
                "nettraffic_peer_routing_notes",
                "Pairs and Services the last pair read counted as spreading evenly though "
                "they might not, by reason: both-directions (the flow source names each end "
                "as a caller), no-hints (trafficDistribution set, hints not on every ready "
                "endpoint), no-slices, no-api (peers.routing services without the API server).",
                "gauge",
                ("reason",),
                lambda: _labelled(peer_routing_notes(serving.scoreboard.snapshot)),
            )
        )
        add(
            Gauge(
                "nettraffic_peer_pairs_age_passes",
                "Learner passes since the pairs in use were read; at peers.maxAgePasses "
                "they stop pulling.",
                lambda: pairs_age(serving.scoreboard.snapshot),
            )
        )
        add(
            Reading(
                "nettraffic_peer_read_failures_total",
                "Failed reads of the flow metrics between workloads, by reason.",
                "counter",
                ("reason",),
                lambda: _labelled(peer_read_failures(serving.scoreboard.snapshot)),
            )
        )

    def _peer_bytes(self) -> dict[tuple[str, ...], float]:
        """The pairs' bytes/s by where they go, worked out once per
        conversations read (or node list) and kept until the next."""
        snapshot = self.serving.scoreboard.snapshot
        learned = snapshot.learned if snapshot else None
        conversations = learned.conversations if learned else None
        if snapshot is None or conversations is None:
            return {}
        key = (conversations, snapshot.nodes)
        if self._peer_key is None or any(
            a is not b for a, b in zip(key, self._peer_key, strict=True)
        ):
            totals = peer_bytes_by_place(snapshot)
            self._peer_totals = {(where,): value for where, value in totals.items()}
            self._peer_key = key
        return self._peer_totals

    def _peer_ignored(self) -> dict[tuple[str, ...], float]:
        snapshot = self.serving.scoreboard.snapshot
        learned = snapshot.learned if snapshot else None
        if learned is None or learned.conversations is None:
            return {}
        return _labelled(learned.conversations.ignored)

    def _requests_by_path(self) -> dict[tuple[str, ...], float]:
        counts = self.requests.values()
        answered = sum(self.admissions.counts().values())  # each admission answered 200
        if answered:
            key = (MUTATE, "200")
            counts[key] = counts.get(key, 0.0) + answered
        return counts


def _labelled(counts: Mapping[str, float]) -> dict[tuple[str, ...], float]:
    """One label's counts as a reading's values."""
    return {(label,): float(n) for label, n in counts.items()}
