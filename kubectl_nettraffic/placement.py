"""Pure placement: a pod and a snapshot in, preferred node terms and a JSON
patch out.

Rules (DESIGN.md §3, Pod mutation):
- Candidates are nodes the pod could actually run on: eligible in the
  snapshot (or blocked only by taints the pod tolerates), matching its
  nodeSelector and required node affinity, and with data.
- The top N candidates by score (in-flight load included) become one
  preferred term each, ``matchFields metadata.name In [node]``, with weights
  graded by score: the best gets 100, each other 100 minus its score gap to
  the best, never below 1.
- Existing affinity of any shape is kept; our terms are appended. A pod that
  already carries ``nettraffic.io/preferred-nodes`` is left alone, so
  reinvocation adds nothing twice.
"""

import functools
import heapq
import json
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from typing import Any, NamedTuple

import jsonpatch

from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.nodes import Node, ineligibility
from kubectl_nettraffic.pod_shape import malformed_part
from kubectl_nettraffic.scoring import NodeScore
from kubectl_nettraffic.tiers import TIER_LABEL, TIER_WEIGHTS
from kubectl_nettraffic.units import parse_quantity
from kubectl_nettraffic.workload_bandwidth import LearnedBandwidth, pod_workload

ANNOTATION_PREFIX = "nettraffic.io/"
PREFERRED_NODES = "nettraffic.io/preferred-nodes"
SCORED_AT = "nettraffic.io/scored-at"
SOURCE = "nettraffic.io/source"
# Scores at admission, "node=score,...", so `explain` can compare then and now.
SCORES = "nettraffic.io/scores"
SKIPPED = "nettraffic.io/skipped"
EXPECTED_BANDWIDTH = "nettraffic.io/expected-bandwidth"
# A steered pod's booking in its replica's in-flight ledger: the label names
# the ledger (random per webhook process), so each replica watches only its
# own pods; the annotation is the booking's key in it (bindings.py).
STEERED_BY = "nettraffic.io/steered-by"
# (The traffic-tier label and its terms' weights: tiers.py.)
BOOKING = "nettraffic.io/booking"
# What a steered pod was booked at (bytes/s), and where that figure came from:
# annotation, workload (learned), cluster (learned over all pods) or default.
BOOKED_BANDWIDTH = "nettraffic.io/booked-bandwidth"
BANDWIDTH_SOURCE = "nettraffic.io/bandwidth-source"
SKIP_LABEL = "nettraffic.io/skip"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

Pod = Mapping[str, Any]
JsonPatch = list[dict[str, Any]]


class Preference(NamedTuple):  # a tuple: several are made on every admission
    node: str
    weight: int
    score: float


def untouchable_reason(
    pod: Pod, namespace_labels: Mapping[str, str] | None, scheduler_names: Sequence[str]
) -> str | None:
    """Pods we never modify at all (no patch, not even an annotation)."""
    if malformed_part(pod) is not None:
        # The API server could not decode such a pod; steering reads none of it.
        return "malformed-pod"
    metadata, spec = pod["metadata"], pod["spec"]
    if spec.get("nodeName"):
        return "node-name-set"
    annotations = metadata.get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return "mirror-pod"
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("kind") == "DaemonSet":
            return "daemonset"
    if (metadata.get("labels") or {}).get(SKIP_LABEL) == "true":
        return "skip-label"
    if (namespace_labels or {}).get(SKIP_LABEL) == "true":
        return "namespace-skip-label"
    if (spec.get("schedulerName") or "default-scheduler") not in scheduler_names:
        return "scheduler-name"
    if PREFERRED_NODES in annotations:
        return "already-steered"
    return None


def expected_bandwidth(
    pod: Pod, learned: LearnedBandwidth | None, default: float
) -> tuple[float, str, str | None]:
    """What the pod will send (bytes/s), where that figure came from
    (annotation | workload | cluster | default), and a warning when its
    annotation is unusable. In that order: the pod's own annotation, its
    workload's learned figure, the cluster-wide learned figure, the default."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(EXPECTED_BANDWIDTH)
    if text is not None:
        value = annotated_bandwidth(text)
        if value is not None:
            return value, "annotation", None
    figure, source = default, "default"
    if learned is not None:
        workload = pod_workload(pod)
        learned_figure = learned.workloads.get(workload) if workload is not None else None
        if learned_figure is not None:
            figure, source = learned_figure, "workload"
        elif learned.cluster is not None:
            figure, source = learned.cluster, "cluster"
    warning = None
    if text is not None:
        instead = {
            "default": "the default",
            "workload": "its workload's learned figure",
            "cluster": "the cluster-wide learned figure",
        }[source]
        warning = (
            f"{EXPECTED_BANDWIDTH}={text!r} is not a bandwidth in bytes/s; "
            f"booked at {instead}, {figure:g}. Write it like 10Mi or 500k"
        )
    return figure, source, warning


def annotated_bandwidth(text: object) -> float | None:
    """Bytes/s from a quantity annotation; None when it is not one."""
    try:
        value = parse_quantity(str(text))
    except ValueError:
        return None
    return value if value >= 0 else None


# ---------------------------------------------------------------- constraints


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


# ---------------------------------------------------------------- choosing


def choose_nodes(
    candidates: Sequence[NodeScore],
    tainted: Sequence[NodeScore],
    nodes: Mapping[str, Node],
    pod: Pod,
    selector: LabelSelector,
    inflight: Mapping[str, tuple[float, int]],
    count: int,
    live: "CandidateHeap | None" = None,
) -> list[Preference]:
    """The best ``count`` nodes for ``pod``, in-flight load included.

    ``candidates`` are eligible nodes with data, best base score first.
    With ``live`` (the same candidates as a heap of live scores) a pod with
    no node constraints takes the top straight off the heap. Otherwise the
    list is scanned: in-flight load only lowers a score, so the scan stops as
    soon as a node's base score cannot beat the current N-th best.
    ``tainted`` (usually few) are nodes blocked only by taints; they count if
    the pod tolerates them.
    """
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    # Min-heap of (effective score, -position, score): the worst kept choice on
    # top. Position in the base ranking breaks ties (less traffic, then name).
    best: list[tuple[float, int, NodeScore]]
    if live is not None and not has_node_constraints(pod):
        ranked = live.top(count)  # best first
        if not (tolerations and tainted):
            return graded(ranked)  # the usual pod: no scan, and no closure built for one
        best = [(effective, -position, score) for effective, position, score in ranked]
        heapq.heapify(best)
        scanned: Sequence[NodeScore] = ()  # the heap has ranked the candidates
    else:
        best, scanned = [], candidates
    fits = pod_fits(pod)

    def consider(position: int, score: NodeScore) -> None:
        node = nodes.get(score.name)
        if node is None or not fits(node):
            return
        key = (score.score_with(inflight.get(score.name, (0.0, 0))[0]), -position, score)
        if len(best) < count:
            heapq.heappush(best, key)
        elif key[:2] > best[0][:2]:
            heapq.heapreplace(best, key)

    for position, score in enumerate(scanned):
        if len(best) == count and score.score <= best[0][0]:
            break
        consider(position, score)
    if tolerations:
        for position, score in enumerate(tainted, start=len(candidates)):
            node = nodes.get(score.name)
            if node is not None and ineligibility(node, selector, tolerations) is None:
                consider(position, score)

    return graded(sorted(best, key=lambda entry: entry[:2], reverse=True))


def has_node_constraints(pod: Pod) -> bool:
    """Whether the pod limits its nodes by nodeSelector or required node affinity."""
    spec = pod.get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    return bool(spec.get("nodeSelector")) or required is not None


class CandidateHeap:
    """Eligible nodes ordered by live score, kept current as pods are booked.

    For the common pod without node constraints, the top N are read off a
    heap near its root, however many nodes carry in-flight load: a long burst
    that water-fills the whole cluster costs the same per pod as the first.
    A booking adds a fresh entry for its node; the node's older entry stays
    behind, superseded, and is dropped once it reaches the root.

    Under load the heap's upper levels stay in the CPU's caches and its deep
    levels do not (at 5,000 nodes most entries are 7 to 12 levels down), so
    an admission costs what it touches deep down. Reading the top in place
    and replacing the root on a booking touch one root-to-leaf path per
    admission; popping the top N and pushing them back touched about ten.
    """

    def __init__(
        self, candidates: Sequence[NodeScore], inflight: Mapping[str, tuple[float, int]]
    ) -> None:
        self._candidates = list(candidates)
        self._position = {score.name: position for position, score in enumerate(candidates)}
        self._extra = [inflight.get(score.name, (0.0, 0))[0] for score in candidates]
        # Entries are (-live score, position, version); only the newest version
        # of a position is valid, so a booking never leaves a duplicate behind.
        self._version = [0] * len(self._candidates)
        self._heap = [
            (-score.score_with(self._extra[i]), i, 0) for i, score in enumerate(candidates)
        ]
        heapq.heapify(self._heap)

    def book(self, name: str, bandwidth: float) -> None:
        position = self._position.get(name)
        if position is None:
            return  # a tainted node chosen for a tolerating pod: not in this heap
        self._extra[position] += bandwidth
        self._version[position] += 1
        live = self._candidates[position].score_with(self._extra[position])
        entry = (-live, position, self._version[position])
        if self._heap and self._heap[0][1] == position:
            # The usual booking: the best node, whose entry is the root. Any
            # entry of this node is superseded now: replace it in one pass down.
            heapq.heapreplace(self._heap, entry)
        else:
            heapq.heappush(self._heap, entry)

    def top(self, count: int) -> list[tuple[float, int, NodeScore]]:
        """The best ``count`` as (live score, position, score), best first."""
        heap, version = self._heap, self._version
        while heap and heap[0][2] != version[heap[0][1]]:
            heapq.heappop(heap)  # superseded by a later booking
        # No entry beats its parent, so a best-first walk down from the root
        # meets the valid entries best first.
        found: list[tuple[float, int, NodeScore]] = []
        frontier = [(heap[0], 0)] if heap else []
        size = len(heap)
        while frontier and len(found) < count:
            (negative, position, entry_version), index = heapq.heappop(frontier)
            if entry_version == version[position]:
                found.append((-negative, position, self._candidates[position]))
            # (else superseded; its subtree may still hold valid ones)
            child = 2 * index + 1
            if child < size:
                heapq.heappush(frontier, (heap[child], child))
                if child + 1 < size:
                    heapq.heappush(frontier, (heap[child + 1], child + 1))
        return found


def graded(ranked: Sequence[tuple[float, int, NodeScore]]) -> list[Preference]:
    """Weights: the best 100, each other 100 minus its score gap, never below 1."""
    if not ranked:
        return []
    top = ranked[0][0]
    preferences = []
    for effective, _, score in ranked:
        weight = round(100 - (top - effective))
        # Comparisons, not max() and min(): two builtins fewer on every admission.
        weight = 1 if weight < 1 else 100 if weight > 100 else weight
        preferences.append(Preference(score.name, weight, effective))
    return preferences


# ---------------------------------------------------------------- patching


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _steered_nodes(affinity: Mapping[str, Any]) -> set[str]:
    """Nodes that already have a one-node matchFields preferred term, and
    TIER_LABEL if a term on the tier label is there already."""
    node_affinity = affinity.get("nodeAffinity") or {}
    found: set[str] = set()
    for term in node_affinity.get(PREFERRED) or []:
        preference = term.get("preference") or {}
        for field in preference.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                found.update(field.get("values") or [])
        for expression in preference.get("matchExpressions") or []:
            if expression.get("key") == TIER_LABEL:
                found.add(TIER_LABEL)
    return found


# The preferred terms on the traffic-tier label, the same for every pod: built once.
_TIER_TERMS = [
    {
        "weight": weight,
        "preference": {
            "matchExpressions": [{"key": TIER_LABEL, "operator": "In", "values": [tier]}]
        },
    }
    for tier, weight in TIER_WEIGHTS.items()
]
_TIER_TEXTS = [json.dumps(term, separators=(",", ":")) for term in _TIER_TERMS]


class AddOp(dict[str, Any]):
    """A JSON patch ``add`` op that carries its own compact JSON text.

    The generic encoder turns every map it meets into a list of item pairs
    and every key and value into a string of its own before joining them,
    and our preferred terms are maps and lists four deep: building the patch
    and encoding it took about 9.7 us, of which the encoding was two thirds.
    Their text is written from a template when the op is built, from the
    same values (7.0 us for both). The annotation ops carry theirs too, so
    no JSON encoder runs for a patch at all (the webhook's answer is written
    the same way: admission.answer). It is what
    ``json.dumps(op, separators=(",", ":"))`` writes, byte for byte; a
    property test holds the two equal. Read-only once built: the text would
    not follow a change.
    """

    __slots__ = ("json",)
    json: str


# A JSON string literal, exactly as json.dumps writes it: the function it
# calls, without its argument handling (which cost more than the encoding).
# The webhook's answer (admission.answer) writes its strings with it too.
json_string = encode_basestring_ascii


def _add_op(path: str, value: Any, value_json: str) -> AddOp:
    op = AddOp(op="add", path=path, value=value)
    op.json = f'{{"op":"add","path":{json_string(path)},"value":{value_json}}}'
    return op


def metadata_ops(pod: Pod, field: str, entries: Mapping[str, str]) -> JsonPatch:
    """Adds of string ``entries`` to the pod's ``metadata.<field>`` (annotations, labels)."""
    existing = (pod.get("metadata") or {}).get(field)
    if not isinstance(existing, dict):
        value = dict(entries)
        pairs = ",".join([f"{json_string(k)}:{json_string(v)}" for k, v in value.items()])
        return [_add_op(f"/metadata/{field}", value, f"{{{pairs}}}")]
    return [
        _add_op(f"/metadata/{field}/{_escape(key)}", value, json_string(value))
        for key, value in entries.items()
    ]


def annotation_ops(pod: Pod, annotations: Mapping[str, str]) -> JsonPatch:
    return metadata_ops(pod, "annotations", annotations)


def affinity_patch(
    pod: Pod,
    preferences: Sequence[Preference],
    annotations: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    tier_terms: bool = False,
) -> JsonPatch:
    """JSON patch appending our terms to whatever affinity the pod has."""
    # isinstance(..., dict), not Mapping: the pod is decoded JSON, and the
    # abstract check costs several times more on every admission.
    affinity = (pod.get("spec") or {}).get("affinity")
    already = _steered_nodes(affinity) if isinstance(affinity, dict) else ()
    terms, texts = [], []
    for p in preferences:
        if p.node not in already:
            terms.append(
                {
                    "weight": p.weight,
                    "preference": {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [p.node]}
                        ]
                    },
                }
            )
            texts.append(
                f'{{"weight":{p.weight!r},"preference":{{"matchFields":[{{"key":"metadata.name",'
                f'"operator":"In","values":[{json_string(p.node)}]}}]}}}}'
            )
    if tier_terms and TIER_LABEL not in already:
        terms.extend(_TIER_TERMS)
        texts.extend(_TIER_TEXTS)
    ops: JsonPatch = []
    if terms:
        listed = f"[{','.join(texts)}]"
        if not isinstance(affinity, dict):
            value = {"nodeAffinity": {PREFERRED: terms}}
            ops.append(
                _add_op("/spec/affinity", value, f'{{"nodeAffinity":{{"{PREFERRED}":{listed}}}}}')
            )
        elif not isinstance(affinity.get("nodeAffinity"), dict):
            path = "/spec/affinity/nodeAffinity"
            ops.append(_add_op(path, {PREFERRED: terms}, f'{{"{PREFERRED}":{listed}}}'))
        elif not isinstance(affinity["nodeAffinity"].get(PREFERRED), list):
            ops.append(_add_op(f"/spec/affinity/nodeAffinity/{PREFERRED}", terms, listed))
        else:
            path = f"/spec/affinity/nodeAffinity/{PREFERRED}/-"
            ops.extend(_add_op(path, term, text) for term, text in zip(terms, texts, strict=True))
    ops.extend(annotation_ops(pod, annotations))
    if labels:
        ops.extend(metadata_ops(pod, "labels", labels))
    return ops


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
    with its abstract-type checks: with cold caches, applying a usual patch
    took 13.3 us from the top and 10.0 us this way (throwaway timing)."""
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


def _apply_sharing_values(document: dict[str, Any], patch: JsonPatch) -> dict[str, Any]:
    for op in patch:
        if "value" not in op:
            raise PatchCheckFailed(f"patch op add {op['path']} has no value")
        part, add = _add_at(op["path"])  # a checked path: under spec or metadata
        if part not in document:
            raise PatchCheckFailed(f"patch op add {op['path']}: the pod has no {part} object")
        document[part] = add._add(document[part], op["value"])  # type: ignore[attr-defined]
    return document


def _object(value: Any) -> Any:
    return value if isinstance(value, dict) else {}


def apply_and_check(pod: Pod, patch: JsonPatch) -> dict[str, Any]:
    """Apply ``patch`` with jsonpatch and check the result before it is sent.

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
