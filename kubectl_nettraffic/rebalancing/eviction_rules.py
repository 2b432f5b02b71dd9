"""Which pods the descheduler's DefaultEvictor would evict, and in what order.

A model for ``kubectl nettraffic rebalance`` to show a plan; the descheduler
itself decides and evicts. Each rule names the upstream place it follows
(kubernetes-sigs/descheduler):

- DaemonSet pods, mirror (static) pods, pods with local storage (emptyDir or
  hostPath), system-critical pods (priority 2000000000 and up) and pods
  without an owner are protected: pkg/framework/plugins/defaultevictor/
  defaultevictor.go, the default pod protections.
- Pods younger than ``minPodAge`` and pods whose owner has fewer than
  ``minReplicas`` pods are left: DefaultEvictorArgs (defaultevictor/types.go).
  The owner's pods are counted among the pods listed, not read from its spec.
- Namespaces in LowNodeUtilization's ``evictableNamespaces.exclude`` are left
  (nodeutilization/nodeutilization.go, evictPods).
- Order: lowest priority first, pods without one before any; equal
  priorities BestEffort, then Burstable, then Guaranteed; then pods without
  the annotation ``descheduler.alpha.kubernetes.io/prefer-no-eviction``
  before pods with it, whatever its value (pkg/descheduler/pod/pods.go,
  SortPodsBasedOnPriorityLowToHigh, and its test's expected order). Ties
  keep the order given (the descheduler's lister order).

Not modelled: nodeFit (whether another node fits the pod's requests and
constraints), PodDisruptionBudgets (the Eviction API enforces them at the
time), PVC and label-selector protections that are off by default.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubectl_nettraffic.kube.pods import MIRROR_ANNOTATION, PREFER_NO_EVICTION

SYSTEM_CRITICAL_PRIORITY = 2000000000  # k8s.io/api/scheduling/v1, SystemCriticalPriority
_QOS_ORDER = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


@dataclass(frozen=True)
class EvictionPolicy:
    excluded_namespaces: frozenset[str]
    min_pod_age: float  # seconds
    min_replicas: int = 2


@dataclass(frozen=True)
class PodFacts:
    """What the rules read of one pod (a v1.Pod's JSON, parsed once)."""

    namespace: str
    name: str
    node: str
    owner: tuple[str, str] | None  # (kind, name) of the controller, None: a bare pod
    priority: int | None
    qos: str  # BestEffort, Burstable, Guaranteed
    age: float  # seconds since creation
    local_storage: bool
    mirror: bool
    prefer_no_eviction: bool = False


def pod_facts(pod: Mapping[str, Any], now: float) -> PodFacts:
    metadata, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    owners = [o for o in metadata.get("ownerReferences") or () if o.get("controller")]
    owners = owners or list(metadata.get("ownerReferences") or ())
    created = metadata.get("creationTimestamp")
    age = now - datetime.fromisoformat(created).timestamp() if created else 0.0
    return PodFacts(
        namespace=metadata.get("namespace", ""),
        name=metadata["name"],
        node=spec.get("nodeName") or "",
        owner=(owners[0].get("kind", ""), owners[0].get("name", "")) if owners else None,
        priority=spec.get("priority"),
        qos=status.get("qosClass") or "BestEffort",
        age=age,
        local_storage=any("emptyDir" in v or "hostPath" in v for v in spec.get("volumes") or ()),
        mirror=MIRROR_ANNOTATION in (metadata.get("annotations") or {}),
        prefer_no_eviction=PREFER_NO_EVICTION in (metadata.get("annotations") or {}),
    )


def not_evictable(
    pod: PodFacts, policy: EvictionPolicy, owner_pods: Mapping[tuple[str, str, str], int]
) -> str | None:
    """Why the policy would leave ``pod`` where it is; None: it may be evicted.
    ``owner_pods``: (namespace, kind, name) -> pods of that owner."""
    if pod.namespace in policy.excluded_namespaces:
        return f"namespace {pod.namespace} is not evictable"
    if pod.mirror:
        return "static pod"
    if pod.owner is None:
        return "no owner (a bare pod is not recreated)"
    if pod.owner[0] == "DaemonSet":
        return "DaemonSet pod"
    if pod.priority is not None and pod.priority >= SYSTEM_CRITICAL_PRIORITY:
        return "system-critical priority"
    if pod.local_storage:
        return "local storage (emptyDir or hostPath)"
    if pod.age < policy.min_pod_age:
        return f"younger than minPodAge ({policy.min_pod_age:g}s)"
    replicas = owner_pods.get((pod.namespace, *pod.owner), 0)
    if replicas < policy.min_replicas:
        return f"{pod.owner[0]}/{pod.owner[1]} has {replicas} pod(s), under minReplicas {policy.min_replicas}"
    return None


def eviction_order(pods: Sequence[PodFacts]) -> list[PodFacts]:
    """``pods`` in the order the descheduler tries them (see the module doc);
    a stable sort, so ties keep the order of ``pods``."""

    def key(pod: PodFacts) -> tuple[bool, int, int, bool]:
        return (
            pod.priority is not None,
            pod.priority or 0,
            _QOS_ORDER.get(pod.qos, 0),
            pod.prefer_no_eviction,
        )

    return sorted(pods, key=key)


def owner_counts(pods: Sequence[PodFacts]) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = {}
    for pod in pods:
        if pod.owner is not None:
            key = (pod.namespace, *pod.owner)
            counts[key] = counts.get(key, 0) + 1
    return counts
