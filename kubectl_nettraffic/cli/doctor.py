"""``kubectl nettraffic doctor``: every part the webhook depends on, checked
in order, each with pass/fail and the fix. Exit 1 when anything fails."""

import argparse
import base64
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cryptography import x509

from kubectl_nettraffic.cli.top import WebhookLocation
from kubectl_nettraffic.config import LearningSettings, Settings
from kubectl_nettraffic.config_file import load_settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.client import api_call, api_client, request_json
from kubectl_nettraffic.kube.cluster import list_nodes
from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.kube.service_routing import routing_as_set
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import (
    CLUSTER_LABELS,
    PAIRS_RULE,
    clusters_in,
    read_peers,
)
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource, TrafficReport
from kubectl_nettraffic.tls.cert_bundle import signed_by
from kubectl_nettraffic.tls.cert_secret import read_secret
from kubectl_nettraffic.tls.webhook_configuration import read_webhook_configuration


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool
    detail: str
    fix: str = ""


class Failed(Exception):
    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail, self.fix = detail, fix


def _check(results: list[Result], name: str, probe: Callable[[], str], fix: str) -> bool:
    try:
        results.append(Result(name, True, probe()))
        return True
    except Failed as failure:
        results.append(Result(name, False, failure.detail, failure.fix))
    except NetTrafficError as error:
        results.append(Result(name, False, str(error), fix))
    return False


def run_doctor(args: argparse.Namespace) -> int:
    settings = load_settings(
        args.config, {"kubeconfig": args.kubeconfig, "prometheus.url": args.prometheus_url}
    )
    return Doctor(args, settings).run()


class Doctor:
    """The checks in order, each a method that returns what it found or
    raises Failed with the fix; later checks read what earlier ones found."""

    def __init__(self, args: argparse.Namespace, settings: Settings) -> None:
        self.args, self.settings = args, settings
        self.api = api_client(settings.kubeconfig, args.context)
        self.ns, self.svc = args.webhook_namespace, args.webhook_service
        self.results: list[Result] = []
        self.ca_bundle: list[x509.Certificate] = []
        self.readyz: dict[str, Any] = {}

    def _waypoints(self) -> frozenset[tuple[str, str]]:
        """Istio ambient's waypoints, as the learner reads them (none where
        the Services cannot be read: their legs then count as pairs)."""
        peers = self.settings.peers
        if peers.source != "istio":
            return frozenset()
        return routing_as_set(self.api, peers.routing).waypoints

    def check(self, name: str, probe: Callable[[], str], fix: str) -> bool:
        return _check(self.results, name, probe, fix)

    def run(self) -> int:
        if not self.check(
            "API server reachable", self.api_reachable, "check --kubeconfig / --context"
        ):
            return _report(self.results)
        self.check("webhook Service has ready endpoints", self.endpoints, "install the chart")
        has_configuration = self.check(
            "MutatingWebhookConfiguration present",
            self.configuration,
            "helm install nettraffic charts/nettraffic, or check --webhook-name",
        )
        if self.check(
            "webhook ready with fresh scores", self.webhook_ready, "check the webhook pods"
        ):
            self.check(
                "webhook's pairs between workloads still pull",
                self.webhook_pairs,
                "check the flow metrics (the peers check below) and the webhook log",
            )
        if has_configuration:
            self.check("caBundle verifies the served cert", self.cert_verifies, "")
        if self.settings.prometheus.url:
            self.check_prometheus()
        else:
            self.results.append(
                Result("Prometheus reachable", True, "not configured: metrics-server only")
            )
        if self.settings.metrics_server.enabled:
            self.check(
                "metrics.k8s.io available",
                lambda: f"usage for {len(MetricsServerSource(self.api).fetch())} node(s)",
                "install metrics-server, or set metricsServer.enabled: false",
            )
        return _report(self.results)

    def api_reachable(self) -> str:
        with api_call("GET /version"):
            info = request_json(self.api, "GET", "/version")
        return f"Kubernetes {info.get('gitVersion', '?')} at {self.api.configuration.host}"

    def endpoints(self) -> str:
        ns, svc = self.ns, self.svc
        with api_call(f"listing EndpointSlices of {ns}/{svc}"):
            slices = request_json(
                self.api,
                "GET",
                f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                query={"labelSelector": f"kubernetes.io/service-name={svc}"},
            )
        ready = [
            address
            for item in slices.get("items") or []
            for endpoint in item.get("endpoints") or []
            if (endpoint.get("conditions") or {}).get("ready", True)
            for address in endpoint.get("addresses") or []
        ]
        if not ready:
            raise Failed(
                f"Service {ns}/{svc} has no ready endpoints",
                f"kubectl -n {ns} get pods,endpointslices; check the webhook pods' /readyz and logs",
            )
        return f"{len(ready)} ready endpoint(s) for {ns}/{svc}"

    def configuration(self) -> str:
        name = self.args.webhook_name
        document = read_webhook_configuration(self.api, name)
        webhooks = document.get("webhooks") or []
        encoded = [((w.get("clientConfig") or {}).get("caBundle") or "") for w in webhooks]
        if not webhooks or not all(encoded):
            raise Failed(
                f"MutatingWebhookConfiguration {name} has webhooks without a caBundle",
                f"kubectl nettraffic certs patch -n {self.ns} --webhook-name {name}",
            )
        self.ca_bundle.extend(x509.load_pem_x509_certificates(base64.b64decode(encoded[0])))
        policies = sorted({str(w.get("failurePolicy")) for w in webhooks})
        return f"{len(webhooks)} webhook(s), caBundle with {len(self.ca_bundle)} CA(s), failurePolicy {', '.join(policies)}"

    def webhook_ready(self) -> str:
        ns, svc = self.ns, self.svc
        location = WebhookLocation(ns, svc, self.args.webhook_port)
        with api_call(f"GET /readyz of {ns}/{svc} via the service proxy"):
            self.readyz.update(request_json(self.api, "GET", location.proxy_path("readyz")))
        if not self.readyz.get("ready") or self.readyz.get("stale"):
            raise Failed(
                f"webhook not ready or its data is stale: {self.readyz}",
                "check prometheus.url and the webhook log; kubectl nettraffic top --source prometheus",
            )
        return f"ready, data {self.readyz.get('snapshotAgeSeconds')}s old"

    def webhook_pairs(self) -> str:
        """The webhook's own pairs, as its /readyz says (read by webhook_ready)."""
        peers = self.readyz.get("peers")
        if peers is None:
            return "no flow source, or no pairs read yet"
        failed = peers.get("failedReads") or {}
        detail = f"read {peers.get('pairsAgePasses')} learner pass(es) ago" + (
            f", failed reads {failed}" if failed else ""
        )
        if not peers.get("pulling"):
            raise Failed(f"pairs too old to pull: {detail}", "")
        return detail

    def cert_verifies(self) -> str:
        ns, svc, secret = self.ns, self.svc, self.args.secret
        stored = read_secret(self.api, ns, secret)
        if stored is None or stored.bundle is None:
            raise Failed(
                f"Secret {ns}/{secret} is missing or malformed",
                f"kubectl nettraffic certs create -n {ns} --service {svc} --secret {secret}",
            )
        served = x509.load_pem_x509_certificate(stored.bundle.cert)
        if not any(signed_by(served, ca) for ca in self.ca_bundle):
            raise Failed(
                "the serving cert in the Secret does not chain to the caBundle",
                f"kubectl nettraffic certs patch -n {ns} --secret {secret} --webhook-name {self.args.webhook_name}",
            )
        if self.readyz and not (self.readyz.get("certificate") or {}).get("inSync", False):
            raise Failed(
                "the webhook serves a different cert than the one in its mounted Secret",
                "wait for the Secret volume to sync (about a minute), or check the webhook log",
            )
        return (
            f"serving cert (expires {served.not_valid_after_utc:%Y-%m-%d}) chains to the caBundle"
        )

    def check_prometheus(self) -> None:
        settings = self.settings
        source = PrometheusSource(settings.prometheus)

        def reachable() -> str:
            source.query_vector("vector(1)")
            return f"{settings.prometheus.url} answers PromQL"

        if not self.check(
            "Prometheus reachable", reachable, "check prometheus.url / --prometheus-url"
        ):
            return
        nodes: list[Node] = []
        reports: list[TrafficReport] = []

        def series_found() -> str:
            nodes.extend(list_nodes(self.api))
            reports.append(source.fetch(nodes))
            return f"node_exporter traffic for {len(reports[0].by_node)} node(s)"

        fix = "check that node_exporter is scraped and prometheus.deviceInclude/deviceExclude"
        if self.check("node_exporter series found", series_found, fix):
            report = reports[0]

            def all_mapped() -> str:
                if report.nodes_without_series or report.unmapped_series:
                    raise Failed(
                        f"nodes without series: {', '.join(report.nodes_without_series) or 'none'}; "
                        f"series for no node: {', '.join(report.unmapped_series) or 'none'}",
                        "set prometheus.nodeMatch (uname, label:<name>, internal-ip) to how your "
                        "exporters are labelled, or deploy node_exporter on the missing nodes",
                    )
                return f"all {len(nodes)} node(s) mapped ({settings.prometheus.node_match})"

            self.check("every node mapped to its series", all_mapped, "")
        known: set[Workload] = set()
        if settings.learning.enabled:
            self.check(
                "per-pod traffic for bandwidth learning",
                lambda: _learning_inputs(source, settings.learning, known),
                "",
            )
        self.check(
            "flow metrics between workloads (peers)",
            lambda: _peer_inputs(source, settings, known, self._waypoints()),
            "",
        )


LEARNING_FIXES = {
    "cadvisor": (
        "Prometheus must scrape the kubelets' cAdvisor endpoint (/metrics/cadvisor; "
        "kube-prometheus-stack's kubelet ServiceMonitor does), or set learning.receiveMetric, "
        "learning.transmitMetric and learning.podSelector to your names"
    ),
    "kube-state-metrics": (
        "install kube-state-metrics and have Prometheus scrape it (kube-prometheus-stack "
        "includes it), or set learning.podOwnerMetric, learning.namespaceLabel and "
        "learning.podLabel to your names"
    ),
}


def _learning_inputs(
    source: PrometheusSource, learning: LearningSettings, known: set[Workload]
) -> str:
    """What the learner reads; ``known`` gets the workloads it found."""
    report = PodTrafficSource(source, learning).fetch()
    if report.missing:
        names = {"cadvisor": "cAdvisor pod network", "kube-state-metrics": "kube-state-metrics"}
        raise Failed(
            f"no {' and no '.join(names[m] for m in report.missing)} series: pods are booked "
            "at steering.defaultPodBandwidth unless annotated",
            "; ".join(LEARNING_FIXES[m] for m in report.missing)
            + " (or set learning.enabled: false)",
        )
    known.update(s.workload for s in report.samples if s.workload is not None)
    return f"{len(report.samples)} pod(s) of {len(known)} workload(s)"


PEER_FIXES = {
    "istio": (
        "have Prometheus scrape the mesh's proxies (Istio's Prometheus integration scrapes "
        "the sidecars and ztunnel), check peers.reporter, or set peers.source: none; a "
        "pair's ends are matched to the workloads learning finds (learning.enabled)"
    ),
    "linkerd": (
        "have Prometheus scrape the proxies as linkerd-viz does (its scrape config turns "
        "the linkerd.io/proxy-<kind> pod labels into deployment, statefulset, ...), or set "
        "peers.source: none; a pair's ends are matched to the workloads learning finds"
    ),
    "beyla": (
        "add network to Beyla's metrics features (metrics.features, BEYLA_PROMETHEUS_FEATURES; "
        "prometheus_export.features in older releases) with Kubernetes attributes (attributes.kubernetes.enable) and its "
        "Prometheus export, or set peers.source: none; a pair's ends are matched to the "
        "workloads learning finds"
    ),
    "obi": (
        "add network to OBI's metrics features (metrics.features or "
        "OTEL_EBPF_METRICS_FEATURES) with Kubernetes attributes (attributes.kubernetes.enable) "
        "and its Prometheus export, or set peers.source: none; a pair's ends are matched to "
        "the workloads learning finds"
    ),
    "query": "check peers.query and peers.labels (the four labels that name a pair's ends)",
}


def _peer_inputs(
    source: PrometheusSource,
    settings: Settings,
    known: set[Workload],
    waypoints: frozenset[tuple[str, str]] = frozenset(),
) -> str:
    """Which flow source the peers come from, what it gave, or why nothing;
    ``waypoints``: Istio ambient's, whose legs are left out as the learner
    leaves them out."""
    peers = settings.peers
    if peers.source == "none":
        return "not configured (peers.source: none): steering counts no conversations"
    clusters = [] if peers.cluster else clusters_in(source, peers)
    if len(clusters) > 1:
        label = CLUSTER_LABELS[peers.source][0]
        raise Failed(
            f"{peers.source}: series of {len(clusters)} clusters ({', '.join(clusters)}) and "
            "peers.cluster is empty: the pairs of same-named workloads are summed across them",
            f"set peers.cluster: {label}=<this cluster's name>",
        )
    report = read_peers(source, peers, settings.prometheus.window, known, waypoints=waypoints)
    if report is None:
        raise Failed("peers.source is query but peers.query is empty", PEER_FIXES["query"])
    ignored = ", ".join(f"{reason} {count}" for reason, count in sorted(report.ignored.items()))
    if not report.peers:
        why = f" (series left out: {ignored})" if ignored else " (no series)"
        raise Failed(f"{peers.source}: no pair of known workloads{why}", PEER_FIXES[peers.source])
    if report.rule_missing:
        raise Failed(
            f"peers.recordingRule is on but Prometheus holds no {PAIRS_RULE}: the learner "
            "reads the flow metrics instead, computing every pair at each read",
            "check that the chart's PrometheusRule is loaded (prometheusRule.labels must match "
            "your Prometheus's ruleSelector), or set peers.recordingRule.enabled: false",
        )
    pairs = len({frozenset((w, peer)) for w, listed in report.peers.items() for peer, _ in listed})
    detail = f"{peers.source}: {pairs} pair(s) among {len(report.peers)} workload(s)"
    if peers.recording_rule.enabled:
        detail += f" (recorded: {PAIRS_RULE})"
    if report.cut_in_prometheus:
        detail += (
            f"; more pair series than peers.maxPerWorkload {peers.max_per_workload} lets through "
            "for the known workloads: each end's busiest cut in Prometheus"
        )
    if report.agent_unknown:
        ip = f"{peers.source}.ip"
        detail += (
            f"; {report.agent_unknown} series without the agent's and the source node's IPs: "
            f"a flow between nodes may count twice (select {ip} and k8s.src.node.ip)"
        )
    return detail + (f"; left out: {ignored}" if ignored else "")


def _report(results: list[Result]) -> int:
    colour = sys.stdout.isatty() and "NO_COLOR" not in os.environ
    for result in results:
        mark = "PASS" if result.ok else "FAIL"
        if colour:
            mark = ("\x1b[32m" if result.ok else "\x1b[31m") + mark + "\x1b[0m"
        print(f"{mark}  {result.name}: {result.detail}")
        if not result.ok and result.fix:
            print(f"      fix: {result.fix}")
    failed = sum(1 for r in results if not r.ok)
    print(f"\n{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0
