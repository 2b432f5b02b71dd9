"""``kubectl nettraffic explain POD``: what the webhook decided for one pod, and why."""

import argparse
from typing import Any

from kubectl_nettraffic.cli.top import WebhookLocation, fetch
from kubectl_nettraffic.config_file import load_settings
from kubectl_nettraffic.errors import ClusterError, NetTrafficError
from kubectl_nettraffic.kube.client import api_call, api_client, context_namespace, request_json
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL
from kubectl_nettraffic.kube.pods import (
    BANDWIDTH_SOURCE,
    BOOKED_BANDWIDTH,
    PEER_PULL,
    PREFERRED,
    PREFERRED_NODES,
    SCORED_AT,
    SCORES,
    SKIPPED,
    SOURCE,
    untouchable_reason,
)
from kubectl_nettraffic.scoring.tiers import TIER_LABEL
from kubectl_nettraffic.units import format_rate

SKIP_EXPLANATIONS = {
    "node-name-set": "spec.nodeName was already set, so no scheduler was involved",
    "mirror-pod": "it is a static (mirror) pod, managed by the kubelet",
    "daemonset": "it belongs to a DaemonSet, which places one pod per node by design",
    "skip-label": "it is labelled nettraffic.io/skip=true",
    "namespace-skip-label": "its namespace is labelled nettraffic.io/skip=true",
    "scheduler-name": "its schedulerName is not in steering.schedulerNames",
    "already-steered": "it already carried nettraffic.io/preferred-nodes (reinvocation)",
    "malformed-pod": "a part of it that steering reads has the wrong JSON type (see the admission warning)",
    "no-candidate": "no eligible node with traffic data fits its nodeSelector, required affinity and tolerations",
    "no-snapshot": "the webhook had no traffic data yet (just started, or no source answered)",
    "stale-snapshot": "the webhook's traffic data was older than refresh.maxStaleness",
}


BANDWIDTH_SOURCES = {
    "annotation": "from its nettraffic.io/expected-bandwidth annotation",
    "workload": "learned from its workload's pods (p90 over the last day, plus 15%)",
    "cluster": "what pods of new workloads sent (its workload has no history yet)",
    "default": "steering.defaultPodBandwidth (nothing learned yet)",
}


def _rate(text: str) -> str:
    try:
        return format_rate(float(text), bits=False)
    except ValueError:
        return text


def _tier(tiers: dict[str, str | None] | None, node: str) -> str:
    return (tiers or {}).get(node) or "-"


def _preferred_terms(spec: dict[str, Any]) -> list[Any]:
    """The pod's preferred node affinity terms."""
    return ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED) or []


def _label_terms(
    spec: dict[str, Any], key: str, operator: str = "In"
) -> list[tuple[int, list[str]]]:
    """(weight, values) of the pod's preferred terms on the node label ``key``."""
    terms = _preferred_terms(spec)
    return [
        (int(term.get("weight") or 0), list(expression.get("values") or []))
        for term in terms
        if isinstance(term, dict)
        for expression in (term.get("preference") or {}).get("matchExpressions") or []
        if expression.get("key") == key and expression.get("operator") == operator
    ]


def _left_out(spec: dict[str, Any]) -> list[str]:
    """The nodes the pod's tier terms leave out by name (``metadata.name NotIn``)."""
    terms = _preferred_terms(spec)
    return sorted(
        {
            str(name)
            for term in terms
            if isinstance(term, dict)
            and any(
                e.get("key") == TIER_LABEL
                for e in (term.get("preference") or {}).get("matchExpressions") or []
            )
            for field in (term.get("preference") or {}).get("matchFields") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "NotIn"
            for name in field.get("values") or []
        }
    )


def _tiers_line(spec: dict[str, Any]) -> str | None:
    """What the pod's terms on the traffic-tier label ask for, if any: the
    tiers by their weights, or (a pod its peers pull to a zone) any tier
    but the busiest."""
    terms = _label_terms(spec, TIER_LABEL)
    if not terms:
        return None
    if _label_terms(spec, ZONE_COPY_LABEL):
        return (
            f"Tiers:      also prefers nodes outside the busiest tier ({TIER_LABEL} "
            f"{', '.join(terms[0][1])}), in its peers' zone most, wherever the scheduler looks"
        )
    weights = "; ".join(f"{', '.join(tiers)} at {weight}" for weight, tiers in terms)
    return (
        f"Tiers:      also prefers nodes by what their {TIER_LABEL} saves it "
        f"({weights}), wherever the scheduler looks"
    )


def _peer_lines(pulled: str) -> list[str]:
    """What ``nettraffic.io/peer-pull`` says: the nodes the pod's peers
    pulled it toward, by how many points, and which peers (or their zone)."""
    lines = []
    for part in filter(None, pulled.split(",")):
        node, _, rest = part.partition("=")
        points, _, why = rest.partition(":")
        if why == "zone":
            reason = "its peers run in that node's zone"
        else:
            reason = "its peers " + ", ".join(why.split("+")) + " run there"
        lines.append(f"  {node}: +{points} points, {reason}")
    if not lines:
        return []
    return ["Peers:      its conversations pulled it toward", *lines]


def _node_weights(spec: dict[str, Any]) -> dict[str, int]:
    """node -> the weight of the pod's one-node preferred term on it."""
    weights = {}
    for term in _preferred_terms(spec):
        for field in (term.get("preference") or {}).get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("operator") == "In":
                for node in field.get("values") or []:
                    weights[str(node)] = int(term.get("weight") or 0)
    return weights


def _ordinal(index: int) -> str:
    return {0: "1st", 1: "2nd", 2: "3rd"}.get(index, f"{index + 1}th")


def explain_text(
    pod: dict[str, Any],
    now_scores: dict[str, int] | None,
    scores_note: str,
    scheduler_names: tuple[str, ...],
    now_tiers: dict[str, str | None] | None = None,
) -> str:
    """``now_scores`` and ``now_tiers``: node -> score and traffic tier in the live scores."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    spec = pod.get("spec") or {}
    lines = [f"Pod {metadata.get('namespace')}/{metadata.get('name')}"]
    preferred = [n for n in (annotations.get(PREFERRED_NODES) or "").split(",") if n]
    if preferred:
        then = dict(
            part.split("=", 1) for part in (annotations.get(SCORES) or "").split(",") if "=" in part
        )
        weights = _node_weights(spec)
        lines.append(
            f"Steered:    yes, scored at {annotations.get(SCORED_AT, '?')} from {annotations.get(SOURCE, '?')}"
            if weights
            else f"Steered:    no term: scored at {annotations.get(SCORED_AT, '?')}, no node saved "
            "it a point over the rest (no link busy enough, no peer near), so kube-scheduler's "
            "own plugins place it"
        )
        lines.append(f"Scores now: {scores_note}")
        lines.append("Preferred:" if weights else "Ranked:")
        width = max(len(n) for n in [*preferred, "NODE"])
        lines.append(f"  {'NODE'.ljust(width)}   WEIGHT   SCORE THEN   SCORE NOW   TIER NOW")
        for node in preferred:
            now = "-" if now_scores is None or node not in now_scores else str(now_scores[node])
            termed = str(weights.get(node, "no term"))
            lines.append(
                f"  {node.ljust(width)}   {termed.ljust(6)}   {then.get(node, '-').ljust(10)}   "
                f"{now.ljust(9)}   {_tier(now_tiers, node)}"
            )
        booked = annotations.get(BOOKED_BANDWIDTH)
        if booked is not None:
            source = annotations.get(BANDWIDTH_SOURCE, "?")
            lines.append(
                f"Booked at:  {_rate(booked)} on its first preference, "
                f"{BANDWIDTH_SOURCES.get(source, source)}"
            )
        lines += _peer_lines(annotations.get(PEER_PULL) or "")
        for weight, zones in _label_terms(spec, ZONE_COPY_LABEL):
            lines.append(
                f"  and zone {', '.join(zones)} (weight {weight}), wherever the scheduler looks "
                f"({ZONE_COPY_LABEL})"
            )
        tiers = _tiers_line(spec)
        if tiers:
            lines.append(tiers)
            outside = sorted(
                {z for _, zones in _label_terms(spec, ZONE_COPY_LABEL, "NotIn") for z in zones}
            )
            if outside:
                lines.append(
                    f"            outside zone {', '.join(outside)}, which its workload's "
                    f"spread keeps it out of ({ZONE_COPY_LABEL})"
                )
            left_out = _left_out(spec)
            if left_out:
                lines.append(
                    f"            but not {', '.join(left_out)}: booked since the measurement "
                    "(a pod bound there whose bytes did not show yet)"
                )
        landed = spec.get("nodeName")
        if not landed:
            lines.append("Landed on:  not scheduled yet")
        elif not weights:
            lines.append(f"Landed on:  {landed}, kube-scheduler's own choice")
        elif landed in preferred:
            lines.append(f"Landed on:  {landed} ({_ordinal(preferred.index(landed))} preference)")
        else:
            tier = _tier(now_tiers, landed)
            lines.append(
                f"Landed on:  {landed}{f' (tier {tier} now)' if tier != '-' else ''}, not a preferred "
                "node: the preference is soft, and the scheduler's other scores (spread, resources) "
                "or its filters outweighed it, or it scored none of them (large clusters: it scores "
                "a sample of the nodes)"
            )
        return "\n".join(lines) + "\n"
    reason = annotations.get(SKIPPED) or untouchable_reason(pod, None, scheduler_names)
    if reason:
        lines.append(f"Steered:    no ({reason}): {SKIP_EXPLANATIONS.get(reason, reason)}")
    else:
        lines.append(
            "Steered:    no nettraffic annotations: the webhook did not see this pod. It may predate the "
            "install, its namespace may be excluded by the webhook's namespaceSelector, or the call failed "
            "and failurePolicy Ignore let it through (see kubectl nettraffic doctor)"
        )
    if spec.get("nodeName"):
        lines.append(f"Landed on:  {spec['nodeName']}")
    return "\n".join(lines) + "\n"


def run_explain(args: argparse.Namespace) -> int:
    overrides = {"kubeconfig": args.kubeconfig, "prometheus.url": args.prometheus_url}
    settings = load_settings(args.config, overrides)
    namespace = args.namespace or context_namespace(settings.kubeconfig, args.context)
    api = api_client(settings.kubeconfig, args.context)
    with api_call(f"reading pod {namespace}/{args.pod}"):
        pod = request_json(api, "GET", f"/api/v1/namespaces/{namespace}/pods/{args.pod}")
    if not isinstance(pod, dict):
        raise ClusterError(f"pod {namespace}/{args.pod}: the API server answered no object")
    try:
        location = WebhookLocation(args.webhook_namespace, args.webhook_service, args.webhook_port)
        document, origin = fetch(args.source, settings, args.context, location, args.verbose)
        now_scores: dict[str, int] | None = {r["name"]: r["score"] for r in document["nodes"]}
        now_tiers: dict[str, str | None] | None = {
            r["name"]: r.get("tier") for r in document["nodes"]
        }
        note = f"from the {origin}, {document['generatedAt']}"
    except NetTrafficError as error:
        now_scores, now_tiers, note = None, None, f"unavailable ({error})"
    print(explain_text(pod, now_scores, note, settings.steering.scheduler_names, now_tiers), end="")
    return 0
