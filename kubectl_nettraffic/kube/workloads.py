"""A pod's workload: the controller its pods are learned and booked under.

One rule, ``owner_workload``, serves both sides that must agree: admission
(from the pod's ownerReferences and labels) and the learner (from
kube-state-metrics' kube_pod_owner, kube_replicaset_owner). A figure
learned under one workload is found at admission only if both derive the
same one from what each can see:

- a ReplicaSet's pods belong to the controller that rolls it out, when that
  is a Deployment or an Argo Rollout: admission sees the hash label the
  controller puts on the pods and ends the ReplicaSet's name with
  (``pod-template-hash``, ``rollouts-pod-template-hash``); the learner sees
  the ReplicaSet's owner. Any other ReplicaSet (bare, or of another
  controller, whose pods carry neither label) is its own workload, on both
  sides;
- a Job named ``<name>-<8 or more digits>`` is the CronJob ``<name>``'s (the
  CronJob controller names each Job by its scheduled time in minutes, and a
  Job's pods carry nothing else that says so); the rule reads the name
  alone, so both sides read the same;
- any other controller (StatefulSet, DaemonSet, a bare Job) is its own
  workload; a pod without one has none.
"""

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

# The label each rollout controller puts on its ReplicaSets' pods, holding
# the hash that ends the ReplicaSet's name, and the controller's kind.
TEMPLATE_HASH_LABELS = {"pod-template-hash": "Deployment", "rollouts-pod-template-hash": "Rollout"}
# kube-state-metrics' owner of an object without one.
NO_OWNER = "<none>"
_CRON_JOB_RUN = re.compile(r"(.+)-[0-9]{8,}")


class Workload(NamedTuple):
    namespace: str
    kind: str  # Deployment, Rollout, StatefulSet, CronJob, Job, ReplicaSet (bare), ...
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


def owner_workload(
    namespace: str,
    kind: str,
    name: str,
    labels: Mapping[str, Any] | None = None,
    parent: tuple[str, str] | None = None,
) -> Workload | None:
    """The workload of a pod whose controller is ``kind``/``name``.
    Admission passes the pod's ``labels``; the learner passes a
    ReplicaSet's owner (kind, name) as ``parent``."""
    if not kind or not name or NO_OWNER in (kind, name):
        return None
    if kind == "ReplicaSet":
        if parent is not None:
            rolled_out = parent[0] in TEMPLATE_HASH_LABELS.values()
            if rolled_out and name.startswith(parent[1] + "-"):
                return Workload(namespace, parent[0], parent[1])
        for label, controller in TEMPLATE_HASH_LABELS.items():
            suffix = "-" + str((labels or {}).get(label) or "")
            if len(suffix) > 1 and name.endswith(suffix):
                return Workload(namespace, controller, name[: -len(suffix)])
    elif kind == "Job":
        run = _CRON_JOB_RUN.fullmatch(name)
        if run is not None:
            return Workload(namespace, "CronJob", run.group(1))
    return Workload(namespace, kind, name)


def pod_template(pod: Mapping[str, Any]) -> Workload | None:
    """The ReplicaSet a rolled-out pod (``TEMPLATE_HASH_LABELS``) belongs to:
    one template of its workload. kube-scheduler's default spread counts
    that ReplicaSet's pods alone (its selector carries the hash:
    pkg/scheduler/framework/plugins/helper/spread.go, DefaultSelector), so a
    rollout's new pods spread by themselves. None for any other pod."""
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels")
    if not isinstance(labels, dict) or not any(labels.get(k) for k in TEMPLATE_HASH_LABELS):
        return None
    for owner in metadata.get("ownerReferences") or []:
        if (
            isinstance(owner, dict)
            and owner.get("controller")
            and owner.get("kind") == "ReplicaSet"
        ):
            name = str(owner.get("name") or "")
            return Workload(metadata.get("namespace") or "", "ReplicaSet", name) if name else None
    return None


def pod_workload(pod: Mapping[str, Any]) -> Workload | None:
    """The workload of a pod being admitted, from its controller reference
    and labels (``owner_workload``)."""
    metadata = pod.get("metadata") or {}
    namespace = metadata.get("namespace") or ""
    labels = metadata.get("labels")
    for owner in metadata.get("ownerReferences") or []:
        if not isinstance(owner, dict) or not owner.get("controller"):
            continue
        kind, name = str(owner.get("kind") or ""), str(owner.get("name") or "")
        return owner_workload(namespace, kind, name, labels if isinstance(labels, dict) else None)
    return None
