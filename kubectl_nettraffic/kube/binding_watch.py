"""Bookings follow the binding, and every replica books every steered pod:
a watch of the pods the webhook's replicas steered.

A steered pod is booked (bookings.py) on its first preference,
because that is all the webhook knows at admission. kube-scheduler may bind
it elsewhere (the preference is only a preference, and it scores a sample
of the nodes). Every comparable system books where the pod was actually
bound: koordinator's LoadAwareScheduling (its pod-assign cache), crane-
scheduler (binding records) and trimaran (its scheduled-pods cache). So do
we, from a watch:

- bound (``spec.nodeName`` set): the booking moves to that node, once;
- deleted, or Failed/Succeeded, before it was bound: the booking is dropped;
- not seen bound yet: the first preference keeps it, as without the watch;
- terminating, finished or deleted after its binding: its place goes
  (inflight/placed.py: each steered pod's node, counted by its workload's
  spread until it ends, as kube-scheduler's spread counts it; watch_lines.py),
  and so does its booking, if not measured yet: it sends nothing more;
- not shown bound by the time its booking is measured: its place goes
  (never created, or Pending: kube-scheduler's spread counts bound pods
  alone); shown bound later, placed again.

The Steerer labels each pod it books with its replica id
(``nettraffic.io/steered-by``, random per process) and annotates the
booking's key (``nettraffic.io/booking``), what it booked
(``nettraffic.io/booked-bandwidth``) and its preferred nodes. The watch
selects every pod carrying the label, whichever replica wrote it; the API
server is the state the replicas share:

- this process's own pods: their bookings move or drop, as above, and the
  first event of each times the watch's delay (bookings.py, ``shown``);
- another replica's (or this pod's before a restart): booked here too, when
  first seen, at what that replica booked, on the node it is bound to or
  else its first preference, as of its creation; then moved or dropped like
  the rest. Pods created longer ago than ``pod_startup`` plus the rate
  window are not booked (the measurements show their traffic already),
  only placed, once bound.

A booking lives only until a measurement shows its pod's traffic (the
store forgets it then); events about older pods find nothing and cost one
lookup, but their deletion, which is decoded. After a dropped watch the
list that follows replays what was missed for pods that still exist; a pod
deleted meanwhile keeps its booking until the store forgets it, and its
place goes (those neither listed nor in flight).
"""

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from kubectl_nettraffic.kube.client import ApiClient
from kubectl_nettraffic.kube.pods import (
    BANDWIDTH_SOURCE,
    BOOKED_BANDWIDTH,
    BOOKING,
    PREFERRED_NODES,
    STEERED_BY,
)
from kubectl_nettraffic.kube.reflector import Reflector
from kubectl_nettraffic.kube.watch_lines import bound_node, ended, ends_raw, finished, raw_value
from kubectl_nettraffic.kube.workloads import Workload, pod_template, pod_workload

log = logging.getLogger(__name__)


class BookingKeeper(Protocol):
    def book_seen(
        self,
        node: str,
        bandwidth: float,
        at: float,
        replica: str,
        workload: Workload | None = None,
        unlearned: bool = False,
        template: Workload | None = None,
    ) -> int: ...
    def is_pending(self, key: int) -> bool: ...
    def shown(self, key: int, at: float) -> None: ...
    @property
    def watch_delay(self) -> float: ...
    @property
    def declined_total(self) -> int: ...
    def rebook(self, key: int, node: str) -> str | None: ...
    def release(self, key: int) -> bool: ...
    def place_seen(self, node: str, workload: Workload, template: Workload | None) -> int: ...
    def place_again(
        self, key: int, node: str, workload: Workload, template: Workload | None
    ) -> None: ...
    def is_placed(self, key: int) -> bool: ...
    def gone(self, key: int) -> bool: ...
    def keep_placed(self, keys: set[int]) -> None: ...


def booking_key(pod: Mapping[str, Any]) -> int:
    """The pod's booking key from its annotation; 0 when absent or not a key."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(BOOKING) if isinstance(annotations, dict) else None
    if isinstance(text, str) and text.isdigit() and len(text) < 19:
        return int(text)
    return 0


# The booking annotation and the replica label as they appear in a watch
# event's JSON (watch_lines.py).
_BOOKING_IN_JSON = b'"' + BOOKING.encode() + b'":"'
_STEERED_BY_IN_JSON = b'"' + STEERED_BY.encode() + b'":"'


def _replica_of(pod: Mapping[str, Any]) -> str | None:
    """The steered-by label: the id of the replica that booked the pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    replica = labels.get(STEERED_BY) if isinstance(labels, dict) else None
    return str(replica) if replica is not None else None


class SeenBooking(NamedTuple):
    """Another replica's booking, from its pod's annotations."""

    node: str  # its first preferred node
    bandwidth: float  # bytes/s
    created: float  # the pod's creation, epoch seconds
    workload: Workload | None  # its pods' spread and fan-in count it on every replica
    # Booked at the default (unlearned): its workload's pods spread
    # (ranking/handicaps.py) on every replica.
    unlearned: bool
    template: Workload | None = None  # its ReplicaSet: the default spread counts it


def _seen_booking(pod: Mapping[str, Any]) -> SeenBooking | None:
    """Another replica's booking; None when its annotations do not make one."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    try:
        bandwidth = float(annotations.get(BOOKED_BANDWIDTH, ""))
        created = datetime.fromisoformat(str(metadata.get("creationTimestamp"))).timestamp()
    except ValueError:
        return None
    node = str(annotations.get(PREFERRED_NODES) or "").split(",")[0]
    if not node or not math.isfinite(bandwidth) or bandwidth <= 0:
        return None
    default = annotations.get(BANDWIDTH_SOURCE) == "default"
    return SeenBooking(node, bandwidth, created, pod_workload(pod), default, pod_template(pod))


class BindingWatch(Reflector):
    """Moves or drops the bookings of this process's pods (labelled
    ``steered-by=<replica>``) as they are bound or go, and books the other
    replicas' steered pods (any other ``steered-by``) as they appear.

    ``horizon``: seconds after its creation a pod's traffic is fully
    measured (pod_startup + the rate window); older pods are not booked."""

    def __init__(
        self,
        api: ApiClient,
        keeper: BookingKeeper,
        replica: str,
        horizon: float = math.inf,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(api, "/api/v1/pods", "steered pods", STEERED_BY)
        self.keeper = keeper
        self.replica = replica
        self._replica_raw = replica.encode()
        self._horizon, self._clock = horizon, clock
        # (the other replica's id, its booking key) -> (our key, creation time)
        self._seen: dict[tuple[str, int], tuple[int, float]] = {}
        self._upserts = 0
        self._counts_lock = threading.Lock()
        # outcome -> bookings: moved (bound elsewhere), kept (bound to the
        # first preference), dropped (went unbound), seen (another replica's
        # pod, booked here), placed (another replica's pod too old to book,
        # counted by its spread), gone (terminating, finished or deleted after its binding).
        self._counts = {"moved": 0, "kept": 0, "dropped": 0, "seen": 0, "placed": 0, "gone": 0}
        # reason -> events that changed nothing: no-booking (the pod's
        # booking is not pending here: moved or dropped already, so its later
        # updates and duplicates; measured already; a key never issued here),
        # too-old (another replica's pod the measurements show already),
        # unusable (another replica's pod whose annotations make no booking).
        self._ignored = {"no-booking": 0, "too-old": 0, "unusable": 0}

    def counts(self) -> dict[str, int]:
        with self._counts_lock:
            return dict(self._counts)

    def ignored(self) -> dict[str, int]:
        with self._counts_lock:
            return dict(self._ignored)

    def _count(self, outcome: str) -> None:
        with self._counts_lock:
            self._counts[outcome] += 1

    def _ignore(self, reason: str) -> None:
        with self._counts_lock:
            self._ignored[reason] += 1

    def _settled(self, outcome: str | None) -> None:
        """Count what a move or a drop did, or that there was nothing to do."""
        if outcome:
            self._count(outcome)
        else:
            self._ignore("no-booking")

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        """Skip, undecoded, the events of pods whose booking is settled.

        A pod's events go on after its binding (the kubelet's status updates
        until it ends), and decoding them was most of the watch's cost. Its
        replica id and booking key are found in the raw line; once this replica no
        longer holds the booking, nothing in the event can matter. A skipped
        event's resourceVersion is not recorded: a watch resumed after one
        gets it again, or a 410 and a list, either way harmless.
        """
        digits = raw_value(line, _BOOKING_IN_JSON)
        if ends_raw(line):
            pass  # its place goes: a few events per pod
        elif digits.isdigit() and len(digits) < 19:
            replica = raw_value(line, _STEERED_BY_IN_JSON)
            if replica == self._replica_raw:
                if not self.keeper.is_pending(int(digits)):
                    self._ignore("no-booking")
                    return None
            else:
                seen = self._seen.get((replica.decode(errors="replace"), int(digits)))
                if seen is not None and not self.keeper.is_pending(seen[0]):
                    self._ignore("no-booking")
                    return None
        return super()._decode(line)

    def _before_horizon(self, created: float) -> bool:
        """A pod created then sends in the measurements already: not booked."""
        return created < self._clock() - self._horizon

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        listed = set()
        for pod in objects:
            self._upsert(pod)
            key = self._our_key(pod)
            if key:
                listed.add(key)
        # The deletions missed while the watch was down.
        self.keeper.keep_placed(listed)
        self._forget_measured()

    def _our_key(self, pod: Mapping[str, Any]) -> int:
        """The key the pod is booked or placed under here; 0: none."""
        key = booking_key(pod)
        replica = _replica_of(pod)
        if not key or replica == self.replica:
            return key
        seen = self._seen.get((str(replica), key))
        return 0 if seen is None else seen[0]

    def _forget_measured(self) -> None:
        """Drop the other replicas' pods that are neither in flight nor
        placed: the store has forgotten them."""
        oldest, keeper = self._clock() - self._horizon, self.keeper
        self._seen = {
            k: v for k, v in self._seen.items() if v[1] >= oldest or keeper.is_placed(v[0])
        }

    def _upsert(self, pod: Mapping[str, Any]) -> None:
        key = booking_key(pod)
        if not key:
            return
        if bound_node(pod) and ended(pod):
            self._remove(pod)  # terminating or finished: its spread counts it no more
            return
        replica = _replica_of(pod)
        if replica != self.replica:
            self._upsert_seen(str(replica), key, pod)
            return
        self.keeper.shown(key, self._clock())
        node = bound_node(pod)
        if node:
            workload = None if self.keeper.is_placed(key) else pod_workload(pod)
            if workload is not None:
                # Its place went with its booking, unbound (Pending, or the watch was down).
                self.keeper.place_again(key, node, workload, pod_template(pod))
                self._count("placed")
            self._settled(self.keeper.rebook(key, node))
        elif finished(pod):
            self._settled("dropped" if self.keeper.release(key) else None)

    def _upsert_seen(self, replica: str, their_key: int, pod: Mapping[str, Any]) -> None:
        self._upserts += 1
        if self._upserts % 10_000 == 0:
            self._forget_measured()
        has_finished = finished(pod)
        node = bound_node(pod)
        seen = self._seen.get((replica, their_key))
        if seen is None:
            booking = None if has_finished else _seen_booking(pod)
            if booking is None:
                self._ignore("unusable")
                return
            if self._before_horizon(booking.created):
                self._ignore("too-old")
                if node and booking.workload is not None:
                    ours = self.keeper.place_seen(node, booking.workload, booking.template)
                    self._seen[(replica, their_key)] = (ours, booking.created)
                    self._count("placed")
                return
            ours = self.keeper.book_seen(
                booking.node,
                booking.bandwidth,
                booking.created,
                replica,
                booking.workload,
                booking.unlearned,
                booking.template,
            )
            self._seen[(replica, their_key)] = (ours, booking.created)
            self._count("seen")
            seen = (ours, booking.created)
        if node:
            self._settled(self.keeper.rebook(seen[0], node))
        elif has_finished:
            self._settled("dropped" if self.keeper.release(seen[0]) else None)

    def _remove(self, pod: Mapping[str, Any]) -> None:
        key = booking_key(pod)
        if not key:
            return
        replica = _replica_of(pod)
        if replica != self.replica:
            seen = self._seen.pop((str(replica), key), None)
            key = seen[0] if seen is not None else 0
        if not key:
            return
        if bound_node(pod):
            if self.keeper.gone(key):
                self._count("gone")
        elif self.keeper.release(key):
            self._count("dropped")
