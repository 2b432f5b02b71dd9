"""The JSON patch that appends our preferred terms and annotations to a pod.

Existing affinity of any shape is kept; our terms are appended, and a node
or tier term the pod already has is not added twice (reinvocation).

Each op carries its own compact JSON text (AddOp), so no encoder runs for a
patch; the admission answer is written the same way (webhook/admission.py).
"""

import json
from collections.abc import Mapping, Sequence
from functools import lru_cache
from json.encoder import encode_basestring_ascii
from typing import Any

from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL
from kubectl_nettraffic.kube.pods import PREFERRED, JsonPatch, Pod
from kubectl_nettraffic.scoring.placement import Preference
from kubectl_nettraffic.scoring.tier_weights import TIER_NAMES, TierTerms
from kubectl_nettraffic.scoring.tiers import TIER_LABEL


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _steered_nodes(affinity: Mapping[str, Any]) -> set[str]:
    """Nodes that already have a one-node matchFields preferred term, and
    TIER_LABEL or ZONE_COPY_LABEL if a term on that label is there already."""
    node_affinity = affinity.get("nodeAffinity") or {}
    found: set[str] = set()
    for term in node_affinity.get(PREFERRED) or []:
        preference = term.get("preference") or {}
        for field in preference.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                found.update(field.get("values") or [])
        for expression in preference.get("matchExpressions") or []:
            if expression.get("key") in (TIER_LABEL, ZONE_COPY_LABEL):
                found.add(expression["key"])
    return found


# A pod its peers pull to a zone prefers, instead of the tier terms, that
# zone's nodes outside the busiest tier, and any node outside it a little
# (QUIET_WEIGHT). The tier terms rank the tiers by what they save the pod,
# on the same scale as the zone term's weight (its share of the pod's
# bytes to peers), so kube-scheduler's choice among a sample's nodes undid
# the zone's pull (docs/design/peers.md, "The terms of a pod with peers");
# leaving the busiest tier out of both keeps the pod off the hot links
# wherever it lands.
QUIET_TIERS = TIER_NAMES[:-1]  # all but the busiest
QUIET_WEIGHT = 10
_QUIET = {"key": TIER_LABEL, "operator": "In", "values": list(QUIET_TIERS)}
_QUIET_EXPRESSION_TEXT = json.dumps(_QUIET, separators=(",", ":"))


@lru_cache(maxsize=256)
def _tier_terms(
    tiers: TierTerms, quiet: bool, barred: frozenset[str], left_out: tuple[str, ...]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The terms on the traffic-tier label (``quiet``: the quiet term
    alone), each also outside the ``barred`` zones (on the zone copy): a
    workload's spread keeps its node terms out of those zones, and quiet
    nodes there matched the tier terms, so kube-scheduler put pods in them
    all the same. A node without the zone copy matches NotIn, as before it
    is written. Each also leaves out the ``left_out`` nodes by name (one
    matchFields requirement each: the API server takes one value per
    field requirement), booked past a point since the tiers were measured
    (scoring/tier_weights.py's ``booked_since``). Few weights and zone
    sets recur: built once each."""
    chosen = ((QUIET_WEIGHT, QUIET_TIERS),) if quiet else tiers
    outside = (
        [{"key": ZONE_COPY_LABEL, "operator": "NotIn", "values": sorted(barred)}] if barred else []
    )
    by_name = (
        {
            "matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": [name]} for name in left_out
            ]
        }
        if left_out
        else {}
    )
    terms = [
        {
            "weight": weight,
            "preference": {
                "matchExpressions": [
                    {"key": TIER_LABEL, "operator": "In", "values": list(names)},
                    *outside,
                ],
                **by_name,
            },
        }
        for weight, names in chosen
    ]
    return terms, [json.dumps(term, separators=(",", ":")) for term in terms]


class AddOp(dict[str, Any]):
    """A JSON patch ``add`` op that carries its own compact JSON text.

    The generic encoder turns every map it meets into a list of item pairs
    and every key and value into a string of its own before joining them,
    and our preferred terms are maps and lists four deep, so encoding cost
    more than building the patch. Their text is written from a template
    when the op is built, from the same values. The annotation ops carry theirs too, so
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
# Compact, and without the cycle check: ops are fresh dicts and lists that
# cannot refer to themselves.
ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)


def patch_text(patch: Sequence[Mapping[str, Any]]) -> str:
    """``patch`` as compact JSON; ops that carry their text (AddOp) are not encoded again."""
    return f"[{','.join([op.json if type(op) is AddOp else ENCODER.encode(op) for op in patch])}]"


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
    tier_terms: TierTerms = (),
    zone_term: tuple[tuple[str, ...], int] | None = None,
    barred_zones: frozenset[str] = frozenset(),
    left_out: tuple[str, ...] = (),
) -> JsonPatch:
    """JSON patch appending our terms to whatever affinity the pod has;
    ``tier_terms``: (weight, tiers) of each term on the traffic-tier label;
    ``zone_term``: (zones, weight) of a term on the peers' zones (with tier
    terms, on its quiet tiers, and the quiet tiers instead of the tier
    terms); ``barred_zones``: zones the tier terms leave out; ``left_out``:
    nodes they leave out."""
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
    quiet_zone = bool(tier_terms) and zone_term is not None
    if tier_terms and TIER_LABEL not in already:
        tiered, tiered_texts = _tier_terms(tier_terms, quiet_zone, barred_zones, left_out)
        terms.extend(tiered)
        texts.extend(tiered_texts)
    if zone_term is not None and ZONE_COPY_LABEL not in already:
        zones, weight = zone_term
        expressions: list[dict[str, Any]] = [
            {"key": ZONE_COPY_LABEL, "operator": "In", "values": list(zones)}
        ]
        values = ",".join(json_string(zone) for zone in zones)
        expression_texts = [f'{{"key":"{ZONE_COPY_LABEL}","operator":"In","values":[{values}]}}']
        if quiet_zone:
            expressions.append(_QUIET)
            expression_texts.append(_QUIET_EXPRESSION_TEXT)
        terms.append({"weight": weight, "preference": {"matchExpressions": expressions}})
        texts.append(
            f'{{"weight":{weight!r},"preference":{{"matchExpressions":'
            f"[{','.join(expression_texts)}]}}}}"
        )
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
