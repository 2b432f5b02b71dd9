"""The pods no replica steered, each on its node: counted by its workload's
spread beside the steered ones (inflight/placed.py).

kube-scheduler's spread counts every pod of a workload that runs. The
steered ones reach ours through their bookings and the binding watch
(binding_watch.py), which selects the ``nettraffic.io/steered-by`` label.
A Deployment's pods that ran before the install, or were admitted while
the webhook did not steer them (a timeout under failurePolicy Ignore, a
namespace outside its selector, a pod steering passed over), carry no
such label. Uncounted, a workload scaled up after the install looked empty
in the zones that held its older pods, and its new pods went there.

So a second watch selects the pods *without* the label
(``!nettraffic.io/steered-by``) and places each bound pod of a workload
until it is terminating, finished or deleted, as kube-scheduler counts it
(watch_lines.py, ``ended``). A pod's events between its binding and its
end (the kubelet's status updates) are skipped undecoded, by its uid.
"""

from collections.abc import Mapping
from typing import Any, Protocol

from kubectl_nettraffic.kube.client import ApiClient
from kubectl_nettraffic.kube.pods import STEERED_BY
from kubectl_nettraffic.kube.reflector import Reflector
from kubectl_nettraffic.kube.watch_lines import bound_node, ended, ends_raw, raw_value
from kubectl_nettraffic.kube.workloads import Workload, pod_template, pod_workload

# ObjectMeta's uid comes before any ownerReference's: the first is the pod's.
_UID_IN_JSON = b'"uid":"'
_BOUND_IN_JSON = b'"nodeName":"'


class PlaceKeeper(Protocol):
    def place_unsteered(self, node: str, workload: Workload, template: Workload | None) -> int: ...
    def gone(self, key: int) -> bool: ...


def _uid(pod: Mapping[str, Any]) -> bytes:
    return str((pod.get("metadata") or {}).get("uid") or "").encode()


class UnsteeredPods(Reflector):
    """Places the bound pods without a steered-by label in ``keeper``, each
    under a key of its own, until they end; ``placed``: how many now."""

    def __init__(self, api: ApiClient, keeper: PlaceKeeper) -> None:
        super().__init__(api, "/api/v1/pods", "unsteered pods", "!" + STEERED_BY)
        self.keeper = keeper
        # uid -> the key its place is under; 0: bound, of no workload (not counted).
        self._keys: dict[bytes, int] = {}
        self.placed = 0

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        """Decode only what can change a count: a pod's first event bound,
        and its end once counted."""
        uid = raw_value(line, _UID_IN_JSON)
        if uid:
            ends = ends_raw(line)
            if uid in self._keys:
                if not ends:
                    return None
            elif ends or _BOUND_IN_JSON not in line:
                return None  # not bound yet, or ending uncounted: nothing to count
        return super()._decode(line)

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        listed = {_uid(pod) for pod in objects}
        for uid in [uid for uid in self._keys if uid not in listed]:
            self._forget(uid)  # deleted while the watch was down
        for pod in objects:
            self._upsert(pod)

    def _upsert(self, pod: Mapping[str, Any]) -> None:
        uid, node = _uid(pod), bound_node(pod)
        if not uid:
            return
        if ended(pod):
            self._forget(uid)
        elif uid not in self._keys and node:
            workload, key = pod_workload(pod), 0
            if workload is not None:
                key = self.keeper.place_unsteered(node, workload, pod_template(pod))
                self.placed += 1
            self._keys[uid] = key

    def _remove(self, pod: Mapping[str, Any]) -> None:
        self._forget(_uid(pod))

    def _forget(self, uid: bytes) -> None:
        key = self._keys.pop(uid, 0)
        if key:
            self.keeper.gone(key)
            self.placed -= 1
