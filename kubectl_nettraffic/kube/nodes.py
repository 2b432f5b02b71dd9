"""Nodes as the engine sees them, parsed from the Kubernetes JSON form.

The same parser serves the API server (list + watch) and the offline file
source (``kubectl get nodes -o json``), so both behave alike.
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.units import parse_quantity

# A taint with one of these effects keeps new pods off the node unless the pod
# tolerates it; PreferNoSchedule is only a hint and does not.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )


# The well-known label of a node's zone (k8s.io/api/core/v1, LabelTopologyZone).
ZONE_LABEL = "topology.kubernetes.io/zone"
# The same zone, copied by the tier label writer when a flow source is set:
# a pod's preferred term selects only labels this project writes
# (docs/design/architecture.md, Contracts: Pod mutation), and a term on the zone holds over whichever
# nodes kube-scheduler samples.
ZONE_COPY_LABEL = "nettraffic.io/zone"


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    allocatable_cpu: float | None = None  # cores
    allocatable_memory: float | None = None  # bytes
    internal_ips: tuple[str, ...] = ()


def _quantity_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def node_from_json(obj: Mapping[str, Any]) -> Node:
    """One ``v1.Node`` object (as JSON) -> Node. Raises ClusterError if unnamed."""
    metadata = obj.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ClusterError(f"a node object has no metadata.name: {str(obj)[:120]}")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
        if isinstance(c, Mapping)
    )
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect", "")))
        for t in spec.get("taints") or []
        if isinstance(t, Mapping)
    )
    allocatable = status.get("allocatable") or {}
    addresses = status.get("addresses") or []
    return Node(
        name=name,
        labels={str(k): str(v) for k, v in (metadata.get("labels") or {}).items()},
        taints=taints,
        ready=ready,
        unschedulable=bool(spec.get("unschedulable", False)),
        allocatable_cpu=_quantity_or_none(allocatable.get("cpu")),
        allocatable_memory=_quantity_or_none(allocatable.get("memory")),
        internal_ips=tuple(
            str(a.get("address"))
            for a in addresses
            if isinstance(a, Mapping) and a.get("type") == "InternalIP" and a.get("address")
        ),
    )


def nodes_from_list(document: Mapping[str, Any], origin: str) -> list[Node]:
    """A NodeList (or ``kind: List``) document -> nodes; ``origin`` names it in errors."""
    items = document.get("items") if isinstance(document, Mapping) else None
    if not isinstance(items, list):
        raise ClusterError(
            f"{origin} is not a node list (no 'items'); produce it with kubectl get nodes -o json"
        )
    return [node_from_json(item) for item in items if isinstance(item, Mapping)]


def toleration_matches(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes' ToleratesTaint: key, operator (Equal/Exists) and effect."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.effect:
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if not key:
        # An empty key with Exists tolerates every taint.
        return bool(operator == "Exists")
    if key != taint.key:
        return False
    if operator == "Exists":
        return True
    return bool((toleration.get("value") or "") == taint.value)


def untolerated_taints(node: Node, tolerations: Sequence[Mapping[str, Any]]) -> list[Taint]:
    return [
        taint
        for taint in node.taints
        if taint.effect in BLOCKING_EFFECTS
        and not any(toleration_matches(t, taint) for t in tolerations)
    ]


def ineligibility(
    node: Node, selector: LabelSelector, tolerations: Sequence[Mapping[str, Any]] = ()
) -> str | None:
    """Why a new pod should not be steered to ``node``; None when it may be.

    ``tolerations`` are the pod's: a taint the pod tolerates does not count.
    """
    if not selector.matches(node.labels):
        return f"not selected by nodes.selector {selector.text!r}"
    if not node.ready:
        return "not Ready"
    if node.unschedulable:
        return "cordoned (unschedulable)"
    blocking = untolerated_taints(node, tolerations)
    if blocking:
        return "tainted " + ",".join(str(t) for t in blocking)
    return None


def zones_of(nodes: Iterable[Node]) -> dict[str, str]:
    """node -> zone, for the nodes that carry ``topology.kubernetes.io/zone``."""
    return {node.name: node.labels[ZONE_LABEL] for node in nodes if node.labels.get(ZONE_LABEL)}
