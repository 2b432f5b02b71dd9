"""A pod's node constraints (nodeSelector, required node affinity) as a
predicate on nodes, with Kubernetes' matching rules."""

from collections.abc import Callable, Mapping
from typing import Any

from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.kube.pods import REQUIRED, Pod


def _expression_matches(expression: Mapping[str, Any], value: str | None) -> bool:
    operator = expression.get("operator")
    values = [str(v) for v in expression.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def _term_matches(term: Mapping[str, Any], node: Node) -> bool:
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False  # Kubernetes: an empty term matches no node
    for expression in expressions:
        if not _expression_matches(expression, node.labels.get(str(expression.get("key")))):
            return False
    for expression in fields:
        value = node.name if expression.get("key") == "metadata.name" else None
        if not _expression_matches(expression, value):
            return False
    return True


def pod_fits(pod: Pod) -> Callable[[Node], bool]:
    """nodeSelector and required node affinity of ``pod`` as a node predicate."""
    spec = pod.get("spec") or {}
    selector = {str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED) or {}
    terms = required.get("nodeSelectorTerms")

    def fits(node: Node) -> bool:
        if any(node.labels.get(k) != v for k, v in selector.items()):
            return False
        return terms is None or any(_term_matches(t, node) for t in terms)

    return fits


def has_node_constraints(pod: Pod) -> bool:
    """Whether the pod limits its nodes by nodeSelector or required node affinity."""
    spec = pod.get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    return bool(spec.get("nodeSelector")) or required is not None
