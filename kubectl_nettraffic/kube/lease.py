"""Leader election on a coordination.k8s.io/v1 Lease, as client-go does it.

Only one replica may write the traffic-tier node labels; two would fight
over a node whose tier their snapshots disagree on. The rules follow
client-go (k8s.io/client-go/tools/leaderelection/leaderelection.go,
LeaderElector.tryAcquireOrRenew and release):

- no Lease: create it, holding it;
- someone else holds it: it is theirs until ``lease_duration`` has passed
  on *our* clock since we last saw the record change (renewTime in the
  record is the holder's clock: skew must not decide);
- expired, empty holder, or ours: update it with our identity and a new
  renewTime, conditional on its resourceVersion, so of two candidates only
  one wins;
- we are leader while our last successful renew is within
  ``renew_deadline`` (shorter than ``lease_duration``, so a leader cut off
  from the API server stops acting before another can take over);
- on stop, a held Lease is released (holder emptied, duration 1 s) so a
  successor need not wait it out.

Defaults are client-go's: 15 s lease, 10 s renew deadline, 2 s retry.

Why not the kubernetes client's own ``kubernetes.leaderelection`` (in the
locked release, 37.0.2): its ``LeaseLock`` builds ``CoordinationV1Api()`` on
the client's global default configuration, not on the ApiClient this
process built from its kubeconfig and context; its ``Config`` calls
``sys.exit`` on an invalid value, which would end the webhook's worker;
``LeaderElection.run`` blocks with no way to stop it and never releases the
Lease, so after a rolling update the next replica waits out the whole lease
(15 s) instead of its next retry (2 s at most,
tests/test_tier_labels.py::test_a_stopped_leader_releases_the_lease_for_its_successor);
and it times the lease on the wall clock, which a clock step moves.
"""

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubectl_nettraffic.kube.client import API_ERRORS, describe_api_error, request_json

log = logging.getLogger(__name__)

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0


def micro_time(at: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElection:
    def __init__(
        self,
        api: k8s.ApiClient,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = LEASE_DURATION,
        renew_deadline: float = RENEW_DEADLINE,
        retry_period: float = RETRY_PERIOD,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._api = api
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self.name, self.namespace, self.identity = name, namespace, identity
        self.lease_duration, self.renew_deadline = lease_duration, renew_deadline
        self.retry_period = retry_period
        self._clock, self._wall = clock, wall_clock
        self._observed: tuple[Any, ...] | None = None  # the holder's record as last seen
        self._observed_at = float("-inf")
        self._renewed_at = float("-inf")  # our last successful acquire or renew
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    def is_leader(self) -> bool:
        return self._clock() - self._renewed_at < self.renew_deadline

    def start(self) -> "LeaseElection":
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop campaigning; a held Lease is released for the next leader."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.retry_period + 5)
        if self.is_leader():
            self._release()
        self._renewed_at = float("-inf")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.try_acquire_or_renew()
            self._stop.wait(self.retry_period)

    def _spec(self, lease: dict[str, Any] | None, now_wall: float) -> dict[str, Any]:
        spec = dict((lease or {}).get("spec") or {})
        if spec.get("holderIdentity") != self.identity:
            spec["acquireTime"] = micro_time(now_wall)
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (
                1 if lease is not None else 0
            )
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, round(self.lease_duration)),
            renewTime=micro_time(now_wall),
        )
        return spec

    def try_acquire_or_renew(self) -> bool:
        """One round of the election; True when we hold the Lease after it."""
        was_leader = self.is_leader()
        now, now_wall = self._clock(), self._wall()
        try:
            try:
                lease = request_json(self._api, "GET", self.path)
            except ApiException as error:
                if error.status != 404:
                    raise
                request_json(
                    self._api,
                    "POST",
                    self._collection,
                    body={
                        "apiVersion": "coordination.k8s.io/v1",
                        "kind": "Lease",
                        "metadata": {"name": self.name, "namespace": self.namespace},
                        "spec": self._spec(None, now_wall),
                    },
                )
                return self._acquired(now, was_leader)
            spec = lease.get("spec") or {}
            record = tuple(
                spec.get(k) for k in ("holderIdentity", "renewTime", "leaseDurationSeconds")
            )
            if record != self._observed:
                self._observed, self._observed_at = record, now
            holder = spec.get("holderIdentity") or ""
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            if holder and holder != self.identity and now < self._observed_at + duration:
                return False  # held by another, and not expired by our clock
            lease["spec"] = self._spec(lease, now_wall)
            request_json(self._api, "PUT", self.path, body=lease)  # carries resourceVersion
            return self._acquired(now, was_leader)
        except ApiException as error:
            if error.status == 409:
                return False  # another candidate won this round
            self.last_error = str(describe_api_error(error, f"Lease {self.namespace}/{self.name}"))
            log.warning("leader election: %s", self.last_error)
            return False
        except API_ERRORS as error:  # the API server did not answer
            self.last_error = str(describe_api_error(error, f"Lease {self.namespace}/{self.name}"))
            log.warning("leader election: %s", self.last_error)
            return False

    def _acquired(self, now: float, was_leader: bool) -> bool:
        self._renewed_at = now
        self.last_error = None
        if not was_leader:
            log.info("became leader (Lease %s/%s, as %s)", self.namespace, self.name, self.identity)
        return True

    def _release(self) -> None:
        try:
            lease = request_json(self._api, "GET", self.path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1)
            lease["spec"] = spec
            request_json(self._api, "PUT", self.path, body=lease)
            log.info("released Lease %s/%s", self.namespace, self.name)
        except API_ERRORS as error:  # it expires by itself anyway
            log.info("could not release Lease %s/%s: %s", self.namespace, self.name, error)
