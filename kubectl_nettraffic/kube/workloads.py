"""A pod's workload: its controller, as the API server's ownerReferences say."""

from collections.abc import Mapping
from typing import Any, NamedTuple


class Workload(NamedTuple):
    namespace: str
    kind: str  # Deployment, StatefulSet, DaemonSet, Job, ReplicaSet (bare), ...
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


def pod_workload(pod: Mapping[str, Any]) -> Workload | None:
    """The workload of a pod being admitted, from its controller reference.

    A ReplicaSet's pods belong to its Deployment when the ReplicaSet's name
    is the Deployment's plus "-" and the pod's ``pod-template-hash`` label
    (as the Deployment controller names them); otherwise to the ReplicaSet.
    """
    metadata = pod.get("metadata") or {}
    namespace = metadata.get("namespace") or ""
    for owner in metadata.get("ownerReferences") or []:
        if not isinstance(owner, dict) or not owner.get("controller"):
            continue
        kind, name = str(owner.get("kind") or ""), str(owner.get("name") or "")
        if not kind or not name:
            return None
        if kind == "ReplicaSet":
            suffix = "-" + str((metadata.get("labels") or {}).get("pod-template-hash") or "")
            if len(suffix) > 1 and name.endswith(suffix):
                return Workload(namespace, "Deployment", name[: -len(suffix)])
        return Workload(namespace, kind, name)
    return None
