"""Bookings follow the binding: a watch of the pods this replica steered.

A steered pod is booked in the in-flight ledger on its first preference,
because that is all the webhook knows at admission. kube-scheduler may bind
it elsewhere (the preference is only a preference, and it scores a sample
of the nodes). Every comparable system books where the pod was actually
bound: koordinator's LoadAwareScheduling (its pod-assign cache), crane-
scheduler (binding records) and trimaran (its scheduled-pods cache). So do
we, from a watch:

- bound (``spec.nodeName`` set): the booking moves to that node, once;
- deleted, or Failed/Succeeded, before it was bound: the booking is dropped;
- not seen bound yet: the first preference keeps it, as without the watch.

The Steerer labels each pod it books with its ledger's id
(``nettraffic.io/steered-by``, random per process) and annotates the
booking's key (``nettraffic.io/booking``); the watch selects that label, so
each replica sees only its own pods and the API server does the filtering.
A booking lives only until a measurement shows its pod's traffic (the
ledger forgets it then); events about older pods find nothing and cost one
lookup. After a dropped watch the list that follows replays what was missed
for pods that still exist; a pod deleted meanwhile keeps its booking until
the ledger forgets it.
"""

import logging
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from kubernetes import client as k8s

from kubectl_nettraffic.cluster import Reflector
from kubectl_nettraffic.pods import BOOKING, STEERED_BY

log = logging.getLogger(__name__)

# Phases after which a pod never runs again; unbound in one, it never will.
_FINISHED = ("Failed", "Succeeded")


class BookingKeeper(Protocol):
    def is_pending(self, key: int) -> bool: ...
    def rebook(self, key: int, node: str) -> str | None: ...
    def release(self, key: int) -> bool: ...


def booking_key(pod: Mapping[str, Any]) -> int:
    """The pod's booking key from its annotation; 0 when absent or not a key."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(BOOKING) if isinstance(annotations, dict) else None
    if isinstance(text, str) and text.isdigit() and len(text) < 19:
        return int(text)
    return 0


# The booking annotation as it appears in a watch event's JSON (Go's encoder,
# like Python's, writes the key's "/" unescaped). Inside another annotation's
# value (kubectl's last-applied-configuration) its quotes are escaped: no match.
_BOOKING_IN_JSON = b'"' + BOOKING.encode() + b'":"'


def _bound_node(pod: Mapping[str, Any]) -> str:
    node = (pod.get("spec") or {}).get("nodeName")
    return node if isinstance(node, str) else ""


class BindingWatch(Reflector):
    """Moves or drops bookings as the pods labelled ``steered-by=<ledger_id>`` are bound or go."""

    def __init__(self, api: k8s.ApiClient, keeper: BookingKeeper, ledger_id: str) -> None:
        super().__init__(api, "/api/v1/pods", "steered pods", f"{STEERED_BY}={ledger_id}")
        self.keeper = keeper
        self._counts_lock = threading.Lock()
        # outcome -> bookings: moved (bound elsewhere), kept (bound to the
        # first preference), dropped (went unbound).
        self._counts = {"moved": 0, "kept": 0, "dropped": 0}

    def counts(self) -> dict[str, int]:
        with self._counts_lock:
            return dict(self._counts)

    def _count(self, outcome: str) -> None:
        with self._counts_lock:
            self._counts[outcome] += 1

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        """Skip, undecoded, the events of pods whose booking is settled.

        A pod's events go on after its binding (the kubelet's status updates
        until it ends), and decoding them was most of the watch's cost. Its
        booking key is found in the raw line; once the ledger no longer holds
        it, nothing in the event can matter. A skipped event's
        resourceVersion is not recorded: a watch resumed after one gets it
        again, or a 410 and a list, either way harmless.
        """
        at = line.find(_BOOKING_IN_JSON)
        if at >= 0:
            start = at + len(_BOOKING_IN_JSON)
            digits = line[start : line.find(b'"', start)]
            if digits.isdigit() and len(digits) < 19 and not self.keeper.is_pending(int(digits)):
                return None
        return super()._decode(line)

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        for pod in objects:
            self._upsert(pod)

    def _upsert(self, pod: Mapping[str, Any]) -> None:
        key = booking_key(pod)
        if not key:
            return
        node = _bound_node(pod)
        if node:
            outcome = self.keeper.rebook(key, node)
            if outcome:
                self._count(outcome)
        elif (pod.get("status") or {}).get("phase") in _FINISHED and self.keeper.release(key):
            self._count("dropped")

    def _remove(self, pod: Mapping[str, Any]) -> None:
        key = booking_key(pod)
        if key and not _bound_node(pod) and self.keeper.release(key):
            self._count("dropped")
