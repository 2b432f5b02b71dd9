"""The JSON types of the pod parts steering reads, checked before any rule runs.

The API server decodes a pod into Go structs, so a pod whose tolerations
are a string or whose affinity is a list never exists there; it can still
arrive in an AdmissionReview sent by anything that reaches the webhook.
Steering reads a few dozen fields, deep down; checking their types once,
up front, lets every rule after it assume the shape and keeps a wrong-typed
pod to one clear skip (``malformed-pod``) instead of a traceback in the middle
of a decision.
"""

from collections.abc import Mapping
from typing import Any

# What steering reads under a node selector term (required affinity) and a
# preferred term's preference: lists of requirement objects with value lists.
_REQUIREMENT_LISTS = ("matchExpressions", "matchFields")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _expect(value: Any, wanted: type, path: str) -> str | None:
    """A description of the problem when ``value`` is neither absent (null) nor ``wanted``."""
    if value is None or isinstance(value, wanted):
        return None
    return f"{path} is {_kind(value)}, not {'an object' if wanted is dict else 'a list'}"


def _objects(items: Any, path: str) -> str | None:
    """A null or a list of objects."""
    problem = _expect(items, list, path)
    if problem or items is None:
        return problem
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            return f"{path}[{index}] is {_kind(item)}, not an object"
    return None


def _requirements(term: Mapping[str, Any], path: str) -> str | None:
    for name in _REQUIREMENT_LISTS:
        requirements = term.get(name)
        problem = _objects(requirements, f"{path}.{name}")
        if problem:
            return problem
        for index, requirement in enumerate(requirements or ()):
            problem = _expect(requirement.get("values"), list, f"{path}.{name}[{index}].values")
            if problem:
                return problem
    return None


def _node_affinity(node_affinity: Any, path: str) -> str | None:
    problem = _expect(node_affinity, dict, path)
    if problem or node_affinity is None:
        return problem
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
    problem = _expect(required, dict, required_path)
    if problem:
        return problem
    terms = (required or {}).get("nodeSelectorTerms")
    problem = _objects(terms, f"{required_path}.nodeSelectorTerms")
    if problem:
        return problem
    for index, term in enumerate(terms or ()):
        problem = _requirements(term, f"{required_path}.nodeSelectorTerms[{index}]")
        if problem:
            return problem
    preferred_path = f"{path}.preferredDuringSchedulingIgnoredDuringExecution"
    preferred = node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
    problem = _objects(preferred, preferred_path)
    if problem:
        return problem
    for index, term in enumerate(preferred or ()):
        preference = term.get("preference")
        problem = _expect(preference, dict, f"{preferred_path}[{index}].preference")
        if problem:
            return problem
        problem = _requirements(preference or {}, f"{preferred_path}[{index}].preference")
        if problem:
            return problem
    return None


def malformed_part(pod: Mapping[str, Any]) -> str | None:
    """The first part of ``pod`` that steering reads and that has the wrong
    JSON type, described for a warning ("spec.tolerations is a string, not a
    list"); None when every part it reads is well-typed."""
    metadata, spec = pod.get("metadata"), pod.get("spec")
    if not isinstance(metadata, dict):
        return f"metadata is {_kind(metadata)}, not an object"
    if not isinstance(spec, dict):
        return f"spec is {_kind(spec)}, not an object"
    for name in ("annotations", "labels"):
        problem = _expect(metadata.get(name), dict, f"metadata.{name}")
        if problem:
            return problem
    namespace = metadata.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        return f"metadata.namespace is {_kind(namespace)}, not a string"
    problem = _objects(metadata.get("ownerReferences"), "metadata.ownerReferences")
    if problem:
        return problem
    problem = _expect(spec.get("nodeSelector"), dict, "spec.nodeSelector") or _objects(
        spec.get("tolerations"), "spec.tolerations"
    )
    if problem:
        return problem
    affinity = spec.get("affinity")
    problem = _expect(affinity, dict, "spec.affinity")
    if problem or affinity is None:
        return problem
    return _node_affinity(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
