"""Our patch applied locally and the result checked before it is sent.

If the check fails the pod is allowed unchanged with a warning (docs/design/architecture.md,
Contracts): a patch that does not apply would make the API server reject the pod.
"""

import functools
import json
from typing import Any

import jsonpatch

from kubectl_nettraffic.kube.pods import PREFERRED, REQUIRED, JsonPatch, Pod


class PatchCheckFailed(ValueError):
    """Our patch, applied locally, did not give a valid pod."""


# The only places our patches may touch. Every op is checked against these
# before anything is applied, so the rest of the pod cannot change.
PATCHABLE = ("/spec/affinity", "/metadata/annotations", "/metadata/labels")
_INSIDE_PATCHABLE = tuple(f"{path}/" for path in PATCHABLE)


def _json_copy(value: Any) -> Any:
    # A JSON round trip copies decoded JSON several times faster than deepcopy.
    return json.loads(json.dumps(value))


def _strings_copy(annotations: Any) -> Any:
    """A copy our ops cannot reach through: of a map of strings (as the API
    server sends), a plain dict copy is one; anything else is copied whole."""
    if isinstance(annotations, dict):
        for value in annotations.values():
            if not isinstance(value, str):
                return _json_copy(annotations)
        return dict(annotations)
    return _json_copy(annotations)


@functools.lru_cache(maxsize=64)
def _add_at(path: str) -> tuple[str, jsonpatch.AddOperation]:
    """Where jsonpatch's ``add`` at ``path`` goes: the pod's part ("spec" or
    "metadata") and the add at the rest of the path within it. Parsed once:
    the value is handed over when it is applied, so one operation serves
    every patch, and our paths come from a handful of constants. Applied
    within its part, the add spares jsonpatch one step down the document,
    with its abstract-type checks, on every admission."""
    part, _, rest = path[1:].partition("/")
    return part, jsonpatch.AddOperation({"op": "add", "path": "/" + rest})


# jsonpatch's AddOperation._add(document, value) adds the value itself; the
# public apply() deep-copies it first (since 1.47), which was two thirds of
# the check's time on every admission. The copy protects a patch from later
# ops writing inside a value an earlier op added, and _check_paths rejects
# such patches before anything is applied. _add is internal, so without it
# the stock JsonPatch runs: slower, same result.
_SHARES_VALUES = hasattr(jsonpatch.AddOperation, "_add")


def _check_paths(patch: JsonPatch) -> None:
    """Every op an ``add`` under PATCHABLE, none inside a value an earlier op added."""
    added: list[str] = []
    for op in patch:
        path = str(op.get("path", ""))
        if op.get("op") != "add" or not (path in PATCHABLE or path.startswith(_INSIDE_PATCHABLE)):
            raise PatchCheckFailed(
                f"patch op {op.get('op')} {path} reaches outside spec.affinity, metadata.annotations and metadata.labels"
            )
        for earlier in added:
            if path.startswith(earlier + "/"):
                raise PatchCheckFailed(
                    f"patch op add {path} writes inside the value added at {earlier}; "
                    "merge them into one op"
                )
        added.append(path)


@functools.lru_cache(maxsize=64)
def _map_member(path: str) -> tuple[str, str] | None:
    """(field, key) where ``path`` adds one member to metadata.annotations or
    metadata.labels, as jsonpatch's pointer parses it (RFC 6901); else None,
    also for a path it rejects (jsonpatch then fails it with its message).
    Parsed once: our paths come from a handful of constants."""
    try:
        parts = jsonpatch.JsonPointer(path).parts
    except jsonpatch.JsonPointerException:
        return None
    if len(parts) == 3 and parts[0] == "metadata" and parts[1] in ("annotations", "labels"):
        return parts[1], parts[2]
    return None


def _apply_sharing_values(document: dict[str, Any], patch: JsonPatch) -> dict[str, Any]:
    for op in patch:
        if "value" not in op:
            raise PatchCheckFailed(f"patch op add {op['path']} has no value")
        member = _map_member(op["path"])
        if member is not None:
            # An add of one member to a map the pod has sets it (RFC 6902,
            # 4.1), as jsonpatch would after walking the path down with an
            # abstract-type check at each step: most of a patch's ops are
            # these, and the walk was most of the check's time. Any other
            # case (the map missing or not an object) goes to jsonpatch.
            target = document.get("metadata", {}).get(member[0])
            if type(target) is dict:
                target[member[1]] = op["value"]
                continue
        part, add = _add_at(op["path"])  # a checked path: under spec or metadata
        if part not in document:
            raise PatchCheckFailed(f"patch op add {op['path']}: the pod has no {part} object")
        document[part] = add._add(document[part], op["value"])  # type: ignore[attr-defined]
    return document


def _object(value: Any) -> Any:
    return value if isinstance(value, dict) else {}


def apply_and_check(pod: Pod, patch: JsonPatch) -> dict[str, Any]:
    """Apply ``patch`` as jsonpatch would (``_apply_sharing_values``) and
    check the result before it is sent.

    Every op must be an ``add`` under spec.affinity, metadata.annotations or
    metadata.labels,
    and none may write inside a value an earlier op added; the patch is then
    applied to a copy of exactly those parts of the pod (the rest is out of
    its reach by the check), and the result is validated. Returns the patched
    parts: ``{"metadata": {...}, "spec": {...}}``, which share values with
    ``patch``: read them, do not change them.
    """
    _check_paths(patch)
    metadata, original_spec = pod.get("metadata"), pod.get("spec")
    # The pod's own parts as the API server will patch them: a part the pod
    # lacks, or that is not an object, is absent here too, so an add under it fails.
    parts: dict[str, Any] = {}
    if isinstance(metadata, dict):
        parts["metadata"] = {}
        for field in ("annotations", "labels"):
            if field in metadata:
                parts["metadata"][field] = _strings_copy(metadata[field])
    if isinstance(original_spec, dict):
        parts["spec"] = {}
        if "affinity" in original_spec:
            parts["spec"]["affinity"] = _json_copy(original_spec["affinity"])
    else:
        original_spec = {}
    try:
        result: dict[str, Any] = (
            _apply_sharing_values(parts, patch)
            if _SHARES_VALUES
            else jsonpatch.JsonPatch(patch).apply(parts, in_place=True)
        )
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        TypeError,
        ValueError,
    ) as error:
        raise PatchCheckFailed(f"patch does not apply: {error}") from None
    affinity = result.get("spec", {}).get("affinity")
    if affinity is not None and not isinstance(affinity, dict):
        raise PatchCheckFailed("patched spec.affinity is not an object")
    # What the pod had where it was not an object, our patch replaced whole.
    after_affinity, before_affinity = affinity or {}, _object(original_spec.get("affinity"))
    for key in ("podAffinity", "podAntiAffinity"):
        if before_affinity.get(key) != after_affinity.get(key):
            raise PatchCheckFailed(f"patch changed spec.affinity.{key}")
    node_affinity = _object(after_affinity.get("nodeAffinity"))
    before = _object(before_affinity.get("nodeAffinity"))
    if node_affinity.get(REQUIRED) != before.get(REQUIRED):
        raise PatchCheckFailed("patch changed required node affinity")
    terms = node_affinity.get(PREFERRED) or []
    existing = before.get(PREFERRED)
    existing = existing if isinstance(existing, list) else []
    if not isinstance(terms, list) or terms[: len(existing)] != existing:
        raise PatchCheckFailed("patch changed existing preferred terms")
    for term in terms:
        weight = term.get("weight") if isinstance(term, dict) else None
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise PatchCheckFailed(f"preferred term weight {weight!r} is outside 1..100")
        for field in (term.get("preference") or {}).get("matchFields") or []:
            if len(field.get("values") or []) != 1:
                raise PatchCheckFailed("a matchFields requirement must have exactly one value")
    for field in ("annotations", "labels"):
        for value in (result.get("metadata", {}).get(field) or {}).values():
            if not isinstance(value, str):
                raise PatchCheckFailed(f"a value in metadata.{field} is not a string")
    return result
