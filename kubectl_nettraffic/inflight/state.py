"""Pods steered but not yet visible in a measurement: their one owner.

Live in-flight state is the in-flight ledger (ledger.py: what each node
carries that no measurement shows yet), the candidate heap built from it
(placement.CandidateHeap: eligible nodes by live score), the booking keys,
the replicas seen steering (replica_share.py), the pods of workloads booked
at the default (unknown_workloads.py), and the lock over all of them. Everything that changes it goes through
InflightState:

- ``adopt``: a new snapshot is published; the ledger moves to its
  measurement time and the heap is rebuilt from its candidates;
- ``steering``: an admission chooses its nodes and books its pod, holding
  the lock throughout, so concurrent admissions see each other's bookings
  (and the other replicas' nodes and its workload's pods booked at the
  default count against the choice);
- ``book_seen``: the binding watch (bindings.py) books a pod another
  replica steered, and so learns which replicas steer (replica_share.py);
- ``shown``: the binding watch shows this process's pod, which times the
  watch's delay (replica_share.py);
- ``rebook`` / ``release``: the binding watch moves a booking to the node
  its pod was bound to, or drops it for a pod that will not run;
- ``view``: readers (/scores, the extender) get the ledger's figures.
"""

import itertools
import threading
from collections.abc import Mapping

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.inflight.candidates import CandidateHeap
from kubectl_nettraffic.inflight.ledger import InflightLedger
from kubectl_nettraffic.inflight.replica_share import Replicas
from kubectl_nettraffic.inflight.unknown_workloads import UnknownWorkloadPods
from kubectl_nettraffic.kube.pods import Pod
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.placement import Preference, choose_nodes, combined


class InflightState:
    """``replica``: this process's id among the replicas (its steered-by
    label); None when it follows no bindings and so sees no other replica."""

    def __init__(self, settings: Settings, replica: str | None = None) -> None:
        self._ledger = InflightLedger(settings.steering.pod_startup, settings.prometheus.window)
        # A pod's traffic is fully in the measurements this long after its creation.
        horizon = settings.steering.pod_startup + settings.prometheus.window
        self._replicas = Replicas(replica, horizon)
        self._unknown = UnknownWorkloadPods(horizon)
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        # Of the adopted snapshot: the ledger's live view at its measurement
        # time (bookings update it in place until the next one) and the heap.
        self._snapshot: Snapshot | None = None
        self._view: Mapping[str, tuple[float, int]] = {}
        self._heap: CandidateHeap | None = None

    def adopt(self, snapshot: Snapshot) -> None:
        """Follow a newly published snapshot."""
        with self._lock:
            self._adopt(snapshot)

    def _adopt(self, snapshot: Snapshot) -> None:
        current = self._snapshot
        if current is not None and (
            snapshot is current or snapshot.generated_at < current.generated_at
        ):
            return  # adopted already, or older than what was (a reader's stale copy)
        self._view = self._ledger.view(snapshot.generated_at)
        self._heap = CandidateHeap(snapshot.candidates, self._view)
        self._snapshot = snapshot

    @property
    def adopted(self) -> Snapshot | None:
        return self._snapshot

    def view(self, snapshot: Snapshot) -> Mapping[str, tuple[float, int]]:
        """node -> (bytes/s not visible in ``snapshot`` yet, pods): look up, do not change."""
        return self._ledger.view(snapshot.generated_at)

    def steering(self, snapshot: Snapshot) -> "Steering":
        """Use in a ``with``: holds the lock, with ``snapshot`` adopted unless
        a newer one is; choose and book through what it enters as."""
        return Steering(self, snapshot)

    def is_pending(self, key: int) -> bool:
        """Whether the booking ``key`` may still move or drop (a lock-free hint)."""
        return self._ledger.is_pending(key)

    def shown(self, key: int, at: float) -> None:
        """The binding watch showed, at ``at``, this process's pod booked as
        ``key``: the watch's delay, which the replica share reads."""
        with self._lock:
            self._replicas.delay.shown(key, at)

    @property
    def watch_delay(self) -> float:
        """Seconds this replica's watch takes to show a pod, as measured."""
        return self._replicas.delay.seconds

    def rebook(self, key: int, node: str) -> str | None:
        """The pod booked as ``key`` was bound to ``node``: its booking moves
        there, once. "moved", "kept" (it was booked there), or None when
        there was nothing to move."""
        with self._lock:
            moved = self._ledger.move(key, node)
            if moved is None:
                return None
            left, unseen = moved
            if left == node:
                return "kept"
            if self._heap is not None:
                self._heap.book(left, -unseen)
                self._heap.book(node, unseen)
            return "moved"

    def release(self, key: int) -> bool:
        """The pod booked as ``key`` will not run (deleted or failed unbound):
        its booking is dropped. False when there was nothing to drop."""
        with self._lock:
            dropped = self._ledger.drop(key)
            if dropped is None:
                return False
            if self._heap is not None:
                self._heap.book(dropped[0], -dropped[1])
            return True

    def book_seen(
        self, node: str, bandwidth: float, at: float, replica: str, unknown: Workload | None = None
    ) -> int:
        """Book a pod this process did not admit (``replica`` steered it:
        another one, or this one before a restart), seen in the watch;
        returns the booking's key here, for ``rebook`` and ``release``.
        ``unknown``: its workload, when it was booked at the default."""
        with self._lock:
            self._replicas.saw(replica, at)
            key = next(self._keys)
            self._book(node, bandwidth, at, key, unknown)
            return key

    def book_at(self, node: str, bandwidth: float, at: float, key: int = 0) -> None:
        """Book a pod admitted at ``at`` outside an admission (benchmarks
        that preload the ledger); admissions book through ``steering``."""
        with self._lock:
            self._book(node, bandwidth, at, key)

    def _book(
        self, node: str, bandwidth: float, at: float, key: int, unknown: Workload | None = None
    ) -> None:
        """``unknown``: the pod's workload, when it was booked at the default."""
        self._ledger.add(node, bandwidth, at, key)
        if self._heap is not None:
            self._heap.book(node, bandwidth)
        if unknown is not None:
            self._unknown.add(unknown, node, at)


class Steering:
    """One admission's hold on the in-flight state: valid only inside its
    ``with`` block, which holds the lock. A class rather than a
    @contextmanager generator because one is entered on every admission."""

    __slots__ = ("_heap", "_state", "snapshot")

    def __init__(self, state: InflightState, snapshot: Snapshot) -> None:
        self._state, self.snapshot = state, snapshot

    def __enter__(self) -> "Steering":
        state = self._state
        state._lock.acquire()
        try:
            state._adopt(self.snapshot)
            assert state._snapshot is not None and state._heap is not None
        except BaseException:
            state._lock.release()
            raise
        # The snapshot the state follows: the one given or a newer one.
        self.snapshot, self._heap = state._snapshot, state._heap
        return self

    def __exit__(self, *_exc: object) -> None:
        self._state._lock.release()

    def choose(
        self,
        pod: Pod,
        selector: LabelSelector,
        count: int,
        bandwidth: float,
        now: float,
        unknown: Workload | None = None,
    ) -> list[Preference]:
        """The best ``count`` nodes for ``pod`` (booked at ``bandwidth``),
        every booking so far counted, and those other replicas may be making;
        ``unknown``: its workload, when it is booked at the default."""
        snapshot, state = self.snapshot, self._state
        share = state._replicas.share(now)
        handicap = combined(
            None if share is None else share.handicap(bandwidth),
            None if unknown is None else state._unknown.handicap(unknown, now),
        )
        return choose_nodes(
            snapshot.candidates,
            snapshot.tainted,
            snapshot.nodes,
            pod,
            selector,
            state._view,
            count,
            self._heap,
            handicap,
        )

    def new_key(self) -> int:
        """A key for a booking, unique in this process."""
        return next(self._state._keys)

    def book(
        self, node: str, bandwidth: float, at: float, key: int, unknown: Workload | None = None
    ) -> None:
        """Book this replica's own admission (its pace scales the share)."""
        self._state._replicas.admitted(key, at)
        self._state._book(node, bandwidth, at, key, unknown)
