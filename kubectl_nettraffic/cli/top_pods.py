"""``kubectl nettraffic top pods|workloads``: network rates per pod and per
owning workload, with the bandwidth learned for each workload and, with a
flow source (``peers.source``), each workload's peers: the bytes between
them, the shares on one node, in one zone and across zones, and what
crossing zones costs a month.
``kubectl top pod`` has no network column; this is it.

Rates come from Prometheus with the learner's own query (cAdvisor and
kube-state-metrics, sources/pod_traffic.py). The LEARNED column is the
running webhook's learned figure (``GET /workloads`` through the service
proxy); with ``--source prometheus``, or when the webhook cannot be reached
with ``--source auto``, it is worked out from the current window alone.
"""

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import yaml

from kubectl_nettraffic.cli.render import aligned
from kubectl_nettraffic.cli.top import WebhookLocation
from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import NetTrafficError, SourceError
from kubectl_nettraffic.kube.client import ApiClient, api_call, api_client, request_json
from kubectl_nettraffic.kube.cluster import list_nodes
from kubectl_nettraffic.kube.nodes import zones_of
from kubectl_nettraffic.kube.service_routing import ZONE, routing_as_set
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.conversations import PodPlaces, conversations_of, shares_of
from kubectl_nettraffic.learning.peer_traffic import read_peers
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport, PodTrafficSource
from kubectl_nettraffic.learning.workload_bandwidth import BandwidthLearner
from kubectl_nettraffic.measuring.scoreview import peer_documents
from kubectl_nettraffic.scoring.node_scores import directional_load
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.units import format_duration, format_rate, rfc3339


def pod_traffic_source(settings: Settings) -> PodTrafficSource:
    if not settings.prometheus.url:
        raise SourceError(
            "per-pod traffic needs Prometheus: set prometheus.url or --prometheus-url"
        )
    return PodTrafficSource(PrometheusSource(settings.prometheus), settings.learning)


def pod_traffic_report(source: PodTrafficSource) -> PodTrafficReport:
    report = source.fetch()
    if report.missing:
        raise SourceError(
            f"Prometheus has no {' and no '.join(report.missing)} series; "
            "kubectl nettraffic doctor says how to get them"
        )
    return report


# workload -> its peers as /workloads gives them (scoreview.peer_documents);
# None: no flow source.
Peers = dict[Workload, list[dict[str, Any]]] | None


def _learned_from_webhook(
    settings: Settings, context: str | None, where: WebhookLocation
) -> tuple[dict[Workload, float], Peers, dict[str, Any] | None]:
    api = api_client(settings.kubeconfig, context)
    with api_call(f"reading learned bandwidth from the webhook {where.namespace}/{where.service}"):
        document = request_json(api, "GET", where.proxy_path("workloads"))
    rows = document.get("workloads") or []

    def workload(row: Mapping[str, Any]) -> Workload:
        return Workload(row["namespace"], row["kind"], row["name"])

    figures = {
        workload(row): float(row["learnedBytesPerSecond"])
        for row in rows
        if row.get("learnedBytesPerSecond") is not None
    }
    pairs = document.get("conversations")
    if pairs is None:
        return figures, None, None
    return figures, {workload(row): list(row.get("peers") or []) for row in rows}, pairs


def _learned_here(
    settings: Settings, samples: Sequence[PodSample], at: float
) -> dict[Workload, float]:
    # One window: a workload's figure from however many pods it has now.
    learner = BandwidthLearner.for_settings(settings, min_samples=1)
    learner.observe(samples, at)
    return dict(learner.learned(at).workloads)


def _peers_here(settings: Settings, context: str | None, report: PodTrafficReport) -> Peers:
    """The pairs from the flow query, placed where this window's pods run
    and counted as the learner counts them (``peers.routing``: the
    Services' routing and Istio ambient's waypoints, read from the API
    server); zones from the nodes' labels. Where the API server does not
    answer, every share of a zone is unknown and the pairs are spread
    evenly."""
    if settings.peers.source == "none":
        return None
    known = {sample.workload for sample in report.samples if sample.workload is not None}
    api: ApiClient | None
    try:
        api = api_client(settings.kubeconfig, context)
        zone_of = zones_of(list_nodes(api))
    except NetTrafficError:
        api, zone_of = None, {}
    routing = routing_as_set(api, settings.peers.routing)
    pairs = read_peers(
        PrometheusSource(settings.prometheus),
        settings.peers,
        settings.prometheus.window,
        known,
        at=report.evaluated_at,  # the moment the rates were read
        waypoints=routing.waypoints,
    )
    if pairs is None:
        return None
    places = PodPlaces()
    places.record(report.samples)
    every_zone = settings.peers.routing == ZONE
    conversations = conversations_of(
        pairs, places, report.evaluated_at, routing.pods, routing.notes, every_zone
    )
    price = settings.peers.cross_zone_price_per_gb
    return {
        workload: peer_documents(shares_of(conversations, workload, zone_of), price)
        for workload in conversations.peers
    }


def learned_figures(
    source: str,
    settings: Settings,
    context: str | None,
    where: WebhookLocation,
    report: PodTrafficReport,
    verbose: bool,
    with_peers: bool = False,
) -> tuple[dict[Workload, float], Peers, str, dict[str, Any] | None]:
    """Learned figures per workload, their peers (``with_peers``), where
    they came from, and the pairs' read status (/workloads' conversations:
    readAt, agePasses, pulling, failedReads) when the webhook has pairs."""
    if source != "prometheus":
        try:
            figures, peers, pairs = _learned_from_webhook(settings, context, where)
            return figures, peers, "webhook", pairs
        except NetTrafficError as error:
            if source == "webhook":
                raise
            if verbose:
                print(
                    f"webhook unavailable ({error}); LEARNED from this window only", file=sys.stderr
                )
    figures = _learned_here(settings, report.samples, report.evaluated_at)
    peers = _peers_here(settings, context, report) if with_peers else None
    return figures, peers, "this window", None


def pod_rows(
    samples: Sequence[PodSample], learned: Mapping[Workload, float], direction: str
) -> list[dict[str, Any]]:
    rows = []
    for sample in samples:
        rows.append(
            {
                "namespace": sample.namespace,
                "name": sample.pod,
                "workload": None
                if sample.workload is None
                else f"{sample.workload.kind}/{sample.workload.name}",
                "receiveBytesPerSecond": round(sample.receive, 3),
                "transmitBytesPerSecond": round(sample.transmit, 3),
                "trafficBytesPerSecond": round(directional_load(sample, direction), 3),
                "learnedBytesPerSecond": _rounded(
                    learned.get(sample.workload) if sample.workload else None
                ),
            }
        )
    return rows


def workload_rows(
    samples: Sequence[PodSample],
    learned: Mapping[Workload, float],
    direction: str,
    peers: Peers = None,
) -> list[dict[str, Any]]:
    grouped: dict[Workload, list[PodSample]] = {}
    for sample in samples:
        if sample.workload is not None:
            grouped.setdefault(sample.workload, []).append(sample)
    rows = []
    for workload, pods in grouped.items():
        traffic = [directional_load(p, direction) for p in pods]
        rows.append(
            {
                "namespace": workload.namespace,
                "name": f"{workload.kind}/{workload.name}",
                "pods": len(pods),
                "receiveBytesPerSecond": round(sum(p.receive for p in pods), 3),
                "transmitBytesPerSecond": round(sum(p.transmit for p in pods), 3),
                "trafficBytesPerSecond": round(sum(traffic), 3),
                "maxPodBytesPerSecond": round(max(traffic), 3),
                "learnedBytesPerSecond": _rounded(learned.get(workload)),
            }
        )
        if peers is not None:
            theirs = peers.get(workload, [])
            rows[-1]["peers"] = theirs
            rows[-1]["crossZoneBytesPerSecond"] = round(
                sum(p["bytesPerSecond"] * p["crossZoneShare"] for p in theirs), 3
            )
            rows[-1]["crossZoneCostPerMonth"] = round(
                sum(p["crossZoneCostPerMonth"] for p in theirs), 2
            )
    return rows


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


_SORT_FIELD = {
    "traffic": "trafficBytesPerSecond",
    "rx": "receiveBytesPerSecond",
    "tx": "transmitBytesPerSecond",
    "learned": "learnedBytesPerSecond",
    "pods": "pods",
}


def sorted_rows(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Busiest first (kubectl top's order for its --sort-by), names A-Z to break ties."""
    by_name = sorted(rows, key=lambda r: (r["namespace"], r["name"]))
    if key == "name":
        return by_name
    field = _SORT_FIELD[key]
    return sorted(by_name, key=lambda r: -(r[field] or 0.0))


def table(
    view: str,
    rows: Sequence[Mapping[str, Any]],
    all_namespaces: bool,
    wide: bool,
    headers: bool,
    bits: bool,
) -> str:
    columns = (["NAMESPACE"] if all_namespaces else []) + ["NAME"]
    if view == "workloads":
        columns.append("PODS")
    columns += ["RX/s", "TX/s", "TRAFFIC", "LEARNED"]
    with_peers = view == "workloads" and any("peers" in row for row in rows)
    if with_peers:
        columns += ["PEERS", "CROSS-ZONE/s", "COST/MONTH"]
    if wide:
        columns.append("WORKLOAD" if view == "pods" else "MAX/POD")
    if wide and with_peers:
        columns.append("TOP PEER (NODE/ZONE/CROSS)")
    lines = [columns] if headers else []
    for row in rows:
        cells = ([row["namespace"]] if all_namespaces else []) + [row["name"]]
        if view == "workloads":
            cells.append(str(row["pods"]))
        cells += [
            format_rate(row["receiveBytesPerSecond"], bits),
            format_rate(row["transmitBytesPerSecond"], bits),
            format_rate(row["trafficBytesPerSecond"], bits),
            format_rate(row["learnedBytesPerSecond"], bits),
        ]
        if with_peers:
            cells += [
                str(len(row.get("peers") or [])),
                format_rate(row.get("crossZoneBytesPerSecond"), bits),
                f"{row.get('crossZoneCostPerMonth') or 0:.2f}",
            ]
        if wide:
            cells.append(
                (row["workload"] or "<none>")
                if view == "pods"
                else format_rate(row["maxPodBytesPerSecond"], bits)
            )
        if wide and with_peers:
            cells.append(_top_peer(row.get("peers") or [], bits))
        lines.append(cells)
    return "".join(text + "\n" for text in aligned(lines))


def _top_peer(peers: Sequence[Mapping[str, Any]], bits: bool) -> str:
    """The busiest peer: its name, bytes/s and where they go."""
    if not peers:
        return "<none>"
    peer = peers[0]
    shares = "/".join(
        f"{100 * peer[key]:.0f}%" for key in ("sameNodeShare", "sameZoneShare", "crossZoneShare")
    )
    routed = peer.get("routing") or "spread"
    routing = "" if routed == "spread" else f" ({routed})"
    return f"{peer['kind']}/{peer['name']} {format_rate(peer['bytesPerSecond'], bits)} {shares}{routing}"


def pairs_line(pairs: Mapping[str, Any], max_age: int) -> str:
    """How old the webhook's pairs are, and whether they still pull."""
    age = int(pairs.get("agePasses") or 0)
    when = f"read {pairs.get('readAt', '?')}, {age} learner pass{'' if age == 1 else 'es'} ago"
    state = (
        "pulling"
        if pairs.get("pulling", True)
        else f"too old: not pulling (peers.maxAgePasses {max_age})"
    )
    failed = ", ".join(f"{reason} {n}" for reason, n in (pairs.get("failedReads") or {}).items())
    return f"\nPairs: {when}; {state}" + (f"; failed reads: {failed}" if failed else "") + "\n"


def run_top_pods(
    args: argparse.Namespace, view: str, settings: Settings, namespace: str | None
) -> int:
    """``namespace`` None: all namespaces (-A)."""
    where = WebhookLocation(args.webhook_namespace, args.webhook_service, args.webhook_port)
    wanted = _selected_pods(settings, args.context, namespace, args.selector)
    source = pod_traffic_source(settings)  # one client (and its connections) for every frame
    frames = 0
    while True:
        report = pod_traffic_report(source)
        samples = [
            s
            for s in report.samples
            if (namespace is None or s.namespace == namespace)
            and (wanted is None or (s.namespace, s.pod) in wanted)
        ]
        learned, peers, origin, pairs = learned_figures(
            args.source,
            settings,
            args.context,
            where,
            replace(report, samples=tuple(samples)),
            args.verbose,
            with_peers=view == "workloads",
        )
        direction = settings.prometheus.direction
        if view == "workloads":
            rows = workload_rows(samples, learned, direction, peers)
        else:
            rows = pod_rows(samples, learned, direction)
        rows = sorted_rows(rows, args.sort_by)
        document: dict[str, Any] = {
            "generatedAt": rfc3339(report.evaluated_at),
            "window": format_duration(settings.prometheus.window),
            "learnedFrom": origin,
            view: rows,
        }
        if view == "workloads" and pairs is not None:
            document["pairs"] = pairs
        if args.output == "json":
            text = json.dumps(document, indent=2) + "\n"
        elif args.output == "yaml":
            text = str(yaml.safe_dump(document, sort_keys=False))
        else:
            text = table(
                view,
                rows,
                namespace is None,
                args.output == "wide",
                not args.no_headers,
                args.units == "bits",
            )
            if view == "workloads" and pairs is not None:
                text += pairs_line(pairs, settings.peers.max_age_passes)
        if args.watch and frames:
            sys.stdout.write("\n")
        sys.stdout.write(text)
        sys.stdout.flush()
        frames += 1
        if not args.watch:
            return 0
        time.sleep(args.interval)


def _selected_pods(
    settings: Settings, context: str | None, namespace: str | None, selector: str
) -> set[tuple[str, str]] | None:
    """(namespace, name) of the pods -l selects, through the API as kubectl does; None: all."""
    if not selector:
        return None
    api = api_client(settings.kubeconfig, context)
    path = "/api/v1/pods" if namespace is None else f"/api/v1/namespaces/{namespace}/pods"
    with api_call(f"listing pods with -l {selector}"):
        listed = request_json(api, "GET", path, query={"labelSelector": selector})
    return {
        (item["metadata"].get("namespace", ""), item["metadata"]["name"])
        for item in listed.get("items") or []
    }
