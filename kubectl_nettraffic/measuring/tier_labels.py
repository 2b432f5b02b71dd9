"""Writes the traffic-tier node labels (tiers.py) from the latest snapshot.

Runs in the refresher process (refresher_process.py), beside the
measurements and off the serving process's GIL, and writes only while its
LeaseElection says this replica leads. Each pass compares the tiers the
snapshot's ranking gives (with hysteresis, against the labels the nodes
carry now) with those labels, and PATCHes the nodes that differ:
a JSON merge patch of ``metadata.labels`` with that one key, nothing else.
It also copies each node's ``topology.kubernetes.io/zone`` to
``nettraffic.io/zone`` (kube/nodes.py), which a pod's term on its peers'
zone selects, and which the tier terms of a pod whose spread bars zones
leave out (steering/affinity_patch.py).

Writes are paced (``writes_per_second``): the first labelling of a large
cluster spreads over a few minutes instead of a burst of thousands of
PATCHes, and a pass that cannot finish before the next snapshot simply
continues from the new one. A refused write (RBAC, or the chart's
ValidatingAdmissionPolicy) is logged with what to fix and counted. RBAC
refuses every node alike, and an API server that does not answer fails
them all: either ends the pass, to be tried again with the next snapshot.
A policy's refusal may concern one node: the pass goes on.
"""

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping

from kubectl_nettraffic.config import Settings, SteeringSettings
from kubectl_nettraffic.kube.client import (
    API_ERRORS,
    ApiClient,
    ApiException,
    describe_api_error,
    request_json,
)
from kubectl_nettraffic.kube.lease import LeaseElection
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.savings import FULL_SAVING, fullness_at, fullness_with
from kubectl_nettraffic.scoring.tiers import (
    DEFAULT_MARGIN,
    TIER_LABEL,
    Busy,
    TierLabelStatus,
    assign_tiers,
    tier_changes,
    tier_ranking,
)

log = logging.getLogger(__name__)

# A write reaches the node watch's cache well within this (seconds).
NODE_CACHE_DELAY = 1.0


def label_patch(labels: Mapping[str, str | None]) -> dict[str, object]:
    """The merge patch that sets (or, with None, removes) ``labels``."""
    return {"metadata": {"labels": dict(labels)}}


def patch_node_labels(api: ApiClient, node: str, labels: Mapping[str, str | None]) -> None:
    request_json(
        api,
        "PATCH",
        f"/api/v1/nodes/{node}",
        body=label_patch(labels),
        content_type="application/merge-patch+json",
    )


def refusal_hint(error: ApiException) -> str:
    """What to do when the API server refuses a label write: RBAC's refusal
    gets the fix; an admission policy's (ours or another's) is quoted."""
    try:
        message = str(json.loads(error.body or "").get("message") or "")
    except (ValueError, AttributeError):
        message = str(error.body or error.reason or "")
    if error.status == 403 and "admission" not in message.lower():
        return (
            "RBAC forbids it: grant patch on nodes to the webhook's service account "
            "(the chart does with steering.trafficTiers=true), or set steering.trafficTiers=false"
        )
    return f"the API server refused it: {message.strip()[:300]}"


class TierLabeller:
    def __init__(
        self,
        api: ApiClient,
        election: LeaseElection,
        margin: float,
        writes_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        default_pod_bandwidth: float = 0.0,
        busy_above: float | None = None,
    ) -> None:
        self._api = api
        # The typical pod the tiers rank for until a cluster-wide figure is
        # learned, and where its link is busy (steering.busyAbove; None: its default).
        self.default_pod_bandwidth = default_pod_bandwidth
        self.busy_above = SteeringSettings().busy_above if busy_above is None else busy_above
        self._wall = wall_clock
        self.election = election
        self.margin = margin
        self._interval = 1.0 / writes_per_second
        self._clock = clock
        self._latest: Snapshot | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._writes = {"written": 0, "refused": 0, "failed": 0}
        self._last_error: str | None = None
        self._thread: threading.Thread | None = None
        # Labels this labeller wrote, by (node, label), and when (wall
        # clock): a snapshot whose node list was taken before a write still
        # shows the old label.
        self._written: dict[tuple[str, str], tuple[str | None, float]] = {}

    def status(self) -> TierLabelStatus:
        with self._lock:
            return TierLabelStatus(self.election.is_leader(), dict(self._writes), self._last_error)

    def offer(self, snapshot: Snapshot | None) -> None:
        """The latest snapshot; the writer thread labels from it when it can."""
        if snapshot is not None:
            self._latest = snapshot
            self._wake.set()

    def start(self) -> "TierLabeller":
        self.election.start()
        self._thread = threading.Thread(target=self._run, name="tier-labels", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(10)
        self.election.stop()

    def _run(self) -> None:
        following = False  # holding a snapshot, but another replica leads
        while not self._stop.is_set():
            # A follower looks again at each election retry, so a replica
            # that takes over (its leader stopped) labels from the snapshot
            # it holds, not one refresh later.
            self._wake.wait(self.election.retry_period if following else None)
            self._wake.clear()
            if self._stop.is_set():
                return
            snapshot = self._latest
            following = snapshot is not None and not self.election.is_leader()
            if snapshot is not None and not following:
                self.label(snapshot)

    def _current(self, snapshot: Snapshot, label: str) -> dict[str, str | None]:
        """Each node's ``label``, what we wrote since the node list was taken counting as there."""
        current = {name: node.labels.get(label) for name, node in snapshot.nodes.items()}
        for (name, written), (value, _) in self._written.items():
            if written == label and name in current:
                current[name] = value
        return current

    def changes(self, snapshot: Snapshot) -> dict[str, str | None]:
        """The tier label writes that bring the nodes to ``snapshot``'s tiers."""
        current = self._current(snapshot, TIER_LABEL)
        previous = {name: value for name, value in current.items() if value is not None}
        assigned = snapshot_tiers(
            snapshot, previous, self.default_pod_bandwidth, self.busy_above, self.margin
        )
        return tier_changes(assigned, current)

    def zone_changes(self, snapshot: Snapshot) -> dict[str, str | None]:
        """The zone copy writes: each node's zone where its copy differs."""
        current = self._current(snapshot, ZONE_COPY_LABEL)
        changes: dict[str, str | None] = {}
        for name, node in snapshot.nodes.items():
            wanted = node.labels.get(ZONE_LABEL) or None
            if current.get(name) != wanted:
                changes[name] = wanted
        return changes

    def label(self, snapshot: Snapshot) -> int:
        """One pass; returns how many nodes were written. Stops early when a
        newer snapshot arrives or leadership is lost."""
        # The snapshot's node list (taken with its measurement, from the watch
        # cache) shows what was written before it: from then on, it is the truth,
        # also when someone else has changed a label since.
        listed_after = snapshot.generated_at - NODE_CACHE_DELAY
        self._written = {
            key: (value, at) for key, (value, at) in self._written.items() if at > listed_after
        }
        writes: dict[str, dict[str, str | None]] = {}
        for label, changes in (
            (TIER_LABEL, self.changes(snapshot)),
            (ZONE_COPY_LABEL, self.zone_changes(snapshot)),
        ):
            for name, value in changes.items():
                writes.setdefault(name, {})[label] = value
        written = 0
        next_at = self._clock()
        for name, labels in writes.items():
            if self._stop.is_set() or self._wake.is_set() or not self.election.is_leader():
                break  # a newer snapshot, or another replica's turn
            pause = next_at - self._clock()
            if pause > 0 and self._stop.wait(pause):
                break
            next_at = max(next_at, self._clock()) + self._interval
            outcome = self._write(name, labels)
            if outcome == "written":
                written += 1
            elif outcome == "stop":
                break  # every other node would fail the same way: next pass
        return written

    def _write(self, node: str, labels: Mapping[str, str | None]) -> str:
        """One PATCH: "written", "skip" (this node only) or "stop" (the pass)."""
        try:
            patch_node_labels(self._api, node, labels)
        except ApiException as error:
            if error.status == 404:
                return "skip"  # the node is gone; the next node list drops it
            if error.status in (403, 422):
                hint = refusal_hint(error)
                what = " and ".join(labels)
                self._failed("refused", f"cannot set {what} on node {node}: {hint}")
                # RBAC refuses every node alike; a policy may refuse just this one.
                return "stop" if hint.startswith("RBAC") else "skip"
            self._failed("failed", str(describe_api_error(error, f"labelling node {node}")))
            return "stop"
        except API_ERRORS as error:  # the API server did not answer
            self._failed("failed", str(describe_api_error(error, f"labelling node {node}")))
            return "stop"
        at = self._wall()
        for label, value in labels.items():
            self._written[(node, label)] = (value, at)
        self._count("written", None)
        return "written"

    def _failed(self, outcome: str, message: str) -> None:
        self._count(outcome, message)
        log.warning("%s", message)

    def _count(self, outcome: str, error: str | None) -> None:
        with self._lock:
            self._writes[outcome] += 1
            if error is not None:
                self._last_error = error


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def lease_namespace(configured: str, namespace_file: str = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The configured namespace, else the pod's own (POD_NAMESPACE, then the
    service account's namespace file), else "default"."""
    if configured:
        return configured
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(namespace_file, encoding="utf-8") as handle:
            return handle.read().strip() or "default"
    except OSError:
        return "default"


def snapshot_tiers(
    snapshot: Snapshot,
    previous: Mapping[str, str],
    default_pod_bandwidth: float,
    busy_above: float,
    margin: float = DEFAULT_MARGIN,
) -> dict[str, str]:
    """node -> tier for ``snapshot``'s candidates, ranked for the cluster's
    typical pod: the learned cluster-wide figure (what pods of workloads not
    learned yet send), else ``default_pod_bandwidth``; busy where that pod
    would cost FULL_SAVING points (above ``busy_above``, steering.busyAbove)."""
    learned = snapshot.learned
    cluster = learned.cluster if learned is not None else None
    typical = default_pod_bandwidth if cluster is None else cluster
    candidates = snapshot.candidates
    fullness = {score.name: fullness_with(score, typical) for score in candidates}
    enter, leave = fullness_at(FULL_SAVING, busy_above), fullness_at(FULL_SAVING / 2, busy_above)
    busy = Busy(fullness, enter, leave)
    return assign_tiers(tier_ranking(candidates, typical), previous, margin, busy=busy)


def tier_labeller(settings: Settings, api: ApiClient) -> TierLabeller:
    """The labeller for these settings, campaigning as this pod (its name and a
    random suffix, so a restarted pod does not pass for its predecessor)."""
    config = settings.tier_labels
    identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{secrets.token_hex(4)}"
    election = LeaseElection(
        api, lease_namespace(config.lease_namespace), config.lease_name, identity
    )
    return TierLabeller(
        api,
        election,
        config.hysteresis,
        config.writes_per_second,
        default_pod_bandwidth=settings.steering.default_pod_bandwidth,
        busy_above=settings.steering.busy_above,
    )


def remove_tier_labels(api: ApiClient) -> list[str]:
    """Take the tier label and the zone copy off every node that has them
    (the uninstall cleanup); the names of the nodes cleaned."""
    names: dict[str, list[str]] = {}
    for label in (TIER_LABEL, ZONE_COPY_LABEL):
        listed = request_json(api, "GET", "/api/v1/nodes", query={"labelSelector": label})
        for item in listed.get("items") or []:
            names.setdefault(str(item["metadata"]["name"]), []).append(label)
    for name, labels in names.items():
        try:
            patch_node_labels(api, name, dict.fromkeys(labels))
        except ApiException as error:
            if error.status != 404:
                raise
    return list(names)
