"""``kubectl nettraffic rebalance``: the nodes over the descheduler's
threshold, their pods by traffic, which the policy would evict first and
where the webhook would steer each replacement. It reads; it never evicts.

Inputs: the scores (the running webhook's /scores, or computed here, as
``top`` gets them), every pod on a node from the API (for the eviction
rules, eviction_rules.py) and each pod's rates from Prometheus (the
learner's query, as ``top pods``). The plan: rebalancing/plan.py.
"""

import argparse
import json
import time
from collections.abc import Sequence
from typing import Any

import yaml

from kubectl_nettraffic.cli.render import aligned
from kubectl_nettraffic.cli.top import WebhookLocation, fetch
from kubectl_nettraffic.cli.top_pods import pod_traffic_report, pod_traffic_source
from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.client import api_call, api_client, request_json
from kubectl_nettraffic.kube.cluster import node_list
from kubectl_nettraffic.rebalancing.eviction_rules import EvictionPolicy, pod_facts
from kubectl_nettraffic.rebalancing.low_node_utilization import Thresholds, descheduler_ready
from kubectl_nettraffic.rebalancing.plan import NodeLoad, Plan, PodStep, plan_rebalance, pod_rates
from kubectl_nettraffic.scoring.node_scores import directional_load
from kubectl_nettraffic.units import format_rate


def _node_loads(document: dict[str, Any], nodes: list[dict[str, Any]]) -> list[NodeLoad]:
    """The scores' rows joined with the API's nodes: the descheduler reads
    readiness and cordons from the Node objects. A node without a traffic
    series keeps no sample (the recording rule has none for it either)."""
    api_nodes = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    loads = []
    for row in document["nodes"]:
        node = api_nodes.get(row["name"], {})
        receive = row.get("receiveBytesPerSecond")
        loads.append(
            NodeLoad(
                name=row["name"],
                receive=receive,
                transmit=(row.get("transmitBytesPerSecond") or 0.0)
                if receive is not None
                else None,
                link_speed=row.get("linkSpeedBytesPerSecond"),
                eligible=bool(row.get("eligible")),
                ready=descheduler_ready(node),
                schedulable=not (node.get("spec") or {}).get("unschedulable", False),
            )
        )
    return loads


def _cluster_objects(
    settings: Settings, context: str | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(nodes, every bound running pod): the descheduler weighs every pod,
    whatever -n shows."""
    api = api_client(settings.kubeconfig, context)
    nodes = list(node_list(api).get("items") or [])
    with api_call("listing pods"):
        listed = request_json(
            api, "GET", "/api/v1/pods", query={"fieldSelector": "status.phase=Running"}
        )
    pods = [p for p in listed.get("items") or [] if (p.get("spec") or {}).get("nodeName")]
    return nodes, pods


def _pod_row(step: PodStep, direction: str) -> dict[str, Any]:
    facts = step.pod.facts
    return {
        "namespace": facts.namespace,
        "name": facts.name,
        "receiveBytesPerSecond": round(step.pod.receive, 3),
        "transmitBytesPerSecond": round(step.pod.transmit, 3),
        "trafficBytesPerSecond": round(directional_load(step.pod, direction), 3),
        "evictionOrder": step.order,
        "cycle": step.cycle,
        "movesTo": step.moves_to,
        "notEvictable": step.not_evictable,
    }


def plan_document(
    plan: Plan,
    namespace: str | None,
    direction: str,
    generated_at: float,
    thresholds: Thresholds,
) -> dict[str, Any]:
    """The plan as JSON, each node's pods busiest first; ``namespace`` None:
    pods of every namespace."""
    return {
        "generatedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(generated_at)),
        "lowThreshold": thresholds.low,
        "threshold": thresholds.high,
        "evictionsPerNode": thresholds.evictions_per_node,
        "cycles": plan.cycles,
        "note": plan.note,
        "nodes": [
            {
                "name": node.name,
                "linkUtilization": round(node.utilization, 6),
                "after": round(node.after, 6),
                "pods": sorted(
                    (
                        _pod_row(step, direction)
                        for step in node.pods
                        if namespace is None or step.pod.facts.namespace == namespace
                    ),
                    key=lambda row: (-row["trafficBytesPerSecond"], row["namespace"], row["name"]),
                ),
            }
            for node in plan.nodes
        ],
    }


def table(document: dict[str, Any], all_namespaces: bool, headers: bool) -> str:
    lines: list[Sequence[str]] = []
    if headers:
        lines.append(["NODE", "LINK%", "AFTER", "POD", "TRAFFIC", "EVICT", "MOVES TO", "NOTE"])
    for node in document["nodes"]:
        first = [node["name"], f"{node['linkUtilization']:.0%}", f"{node['after']:.0%}"]
        pods = node["pods"] or [None]
        for index, pod in enumerate(pods):
            lead = first if index == 0 else ["", "", ""]
            if pod is None:
                lines.append([*lead, "(no pods in this namespace)", "", "", "", ""])
                continue
            name = f"{pod['namespace']}/{pod['name']}" if all_namespaces else pod["name"]
            lines.append(
                [
                    *lead,
                    name,
                    format_rate(pod["trafficBytesPerSecond"], False),
                    str(pod["evictionOrder"] or "-"),
                    pod["movesTo"] or "-",
                    pod["notEvictable"] or "",
                ]
            )
    text = "".join(line.rstrip() + "\n" for line in aligned(lines)) if document["nodes"] else ""
    if document["note"]:
        text += f"{document['note'][0].upper()}{document['note'][1:]}.\n"
    elif document["nodes"]:
        cycles, per_node = document["cycles"], document["evictionsPerNode"]
        text += (
            f"{cycles} descheduler cycle{'s' if cycles != 1 else ''}, up to {per_node} "
            f"eviction{'s' if per_node != 1 else ''} per node each; "
            "nothing is evicted by this command.\n"
        )
    return text


def run_rebalance(args: argparse.Namespace, settings: Settings, namespace: str | None) -> int:
    if not 0 <= args.low_threshold < args.threshold <= 100:
        raise NetTrafficError(
            f"--low-threshold {args.low_threshold:g} and --threshold {args.threshold:g}: "
            "use 0 <= low < threshold <= 100, as the policy's thresholds and targetThresholds"
        )
    location = WebhookLocation(args.webhook_namespace, args.webhook_service, args.webhook_port)
    scores, _origin = fetch(args.source, settings, args.context, location, args.verbose)
    now = time.time()
    nodes, running = _cluster_objects(settings, args.context)
    facts = [pod_facts(p, now) for p in running]
    report = pod_traffic_report(pod_traffic_source(settings))
    rates = {(s.namespace, s.pod): (s.receive, s.transmit) for s in report.samples}
    policy = EvictionPolicy(
        excluded_namespaces=frozenset({"kube-system", args.webhook_namespace}),
        min_pod_age=args.min_pod_age,
    )
    direction = settings.prometheus.direction
    thresholds = Thresholds(args.low_threshold, args.threshold, args.evictions_per_node)
    plan = plan_rebalance(
        _node_loads(scores, nodes), pod_rates(rates, facts), policy, thresholds, direction
    )
    document = plan_document(plan, namespace, direction, report.evaluated_at, thresholds)
    if args.output == "json":
        print(json.dumps(document, indent=2))
    elif args.output == "yaml":
        print(yaml.safe_dump(document, sort_keys=False), end="")
    else:
        print(table(document, namespace is None, not args.no_headers), end="")
    return 0
