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
from kubectl_nettraffic.config import LearningSettings
from kubectl_nettraffic.config_file import load_settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.cluster import api_client, describe_api_error, list_nodes, request_json
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource
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
    results: list[Result] = []
    api = api_client(settings.kubeconfig, args.context)
    ns, svc = args.webhook_namespace, args.webhook_service

    def api_reachable() -> str:
        try:
            info = request_json(api, "GET", "/version")
        except Exception as error:
            raise describe_api_error(error, "GET /version") from None
        return f"Kubernetes {info.get('gitVersion', '?')} at {api.configuration.host}"

    if not _check(results, "API server reachable", api_reachable, "check --kubeconfig / --context"):
        return _report(results)

    def endpoints() -> str:
        try:
            slices = request_json(
                api,
                "GET",
                f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                query={"labelSelector": f"kubernetes.io/service-name={svc}"},
            )
        except Exception as error:
            raise describe_api_error(error, f"listing EndpointSlices of {ns}/{svc}") from None
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

    _check(results, "webhook Service has ready endpoints", endpoints, "install the chart")

    ca_bundle: list[x509.Certificate] = []

    def configuration() -> str:
        document = read_webhook_configuration(api, args.webhook_name)
        webhooks = document.get("webhooks") or []
        encoded = [((w.get("clientConfig") or {}).get("caBundle") or "") for w in webhooks]
        if not webhooks or not all(encoded):
            raise Failed(
                f"MutatingWebhookConfiguration {args.webhook_name} has webhooks without a caBundle",
                f"kubectl nettraffic certs patch -n {ns} --webhook-name {args.webhook_name}",
            )
        ca_bundle.extend(x509.load_pem_x509_certificates(base64.b64decode(encoded[0])))
        policies = sorted({str(w.get("failurePolicy")) for w in webhooks})
        return f"{len(webhooks)} webhook(s), caBundle with {len(ca_bundle)} CA(s), failurePolicy {', '.join(policies)}"

    has_configuration = _check(
        results,
        "MutatingWebhookConfiguration present",
        configuration,
        "helm install nettraffic charts/nettraffic, or check --webhook-name",
    )

    readyz: dict[str, Any] = {}

    def webhook_ready() -> str:
        try:
            location = WebhookLocation(ns, svc, args.webhook_port)
            readyz.update(request_json(api, "GET", location.proxy_path("readyz")))
        except Exception as error:
            raise describe_api_error(
                error, f"GET /readyz of {ns}/{svc} via the service proxy"
            ) from None
        if not readyz.get("ready") or readyz.get("stale"):
            raise Failed(
                f"webhook not ready or its data is stale: {readyz}",
                "check prometheus.url and the webhook log; kubectl nettraffic top --source prometheus",
            )
        return f"ready, data {readyz.get('snapshotAgeSeconds')}s old"

    _check(results, "webhook ready with fresh scores", webhook_ready, "check the webhook pods")

    def cert_verifies() -> str:
        stored = read_secret(api, ns, args.secret)
        if stored is None or stored.bundle is None:
            raise Failed(
                f"Secret {ns}/{args.secret} is missing or malformed",
                f"kubectl nettraffic certs create -n {ns} --service {svc} --secret {args.secret}",
            )
        served = x509.load_pem_x509_certificate(stored.bundle.cert)
        if not any(signed_by(served, ca) for ca in ca_bundle):
            raise Failed(
                "the serving cert in the Secret does not chain to the caBundle",
                f"kubectl nettraffic certs patch -n {ns} --secret {args.secret} --webhook-name {args.webhook_name}",
            )
        if readyz and not (readyz.get("certificate") or {}).get("inSync", False):
            raise Failed(
                "the webhook serves a different cert than the one in its mounted Secret",
                "wait for the Secret volume to sync (about a minute), or check the webhook log",
            )
        return (
            f"serving cert (expires {served.not_valid_after_utc:%Y-%m-%d}) chains to the caBundle"
        )

    if has_configuration:
        _check(results, "caBundle verifies the served cert", cert_verifies, "")

    nodes = []
    if settings.prometheus.url:
        source = PrometheusSource(settings.prometheus)

        def prometheus_reachable() -> str:
            source.query_vector("vector(1)")
            return f"{settings.prometheus.url} answers PromQL"

        if _check(
            results,
            "Prometheus reachable",
            prometheus_reachable,
            "check prometheus.url / --prometheus-url",
        ):
            report_box: list[Any] = []

            def series_found() -> str:
                nodes.extend(list_nodes(api))
                report_box.append(source.fetch(nodes))
                return f"node_exporter traffic for {len(report_box[0].by_node)} node(s)"

            fix = "check that node_exporter is scraped and prometheus.deviceInclude/deviceExclude"
            if _check(results, "node_exporter series found", series_found, fix):
                report = report_box[0]

                def all_mapped() -> str:
                    if report.nodes_without_series or report.unmapped_series:
                        raise Failed(
                            f"nodes without series: {', '.join(report.nodes_without_series) or 'none'}; "
                            f"series for no node: {', '.join(report.unmapped_series) or 'none'}",
                            "set prometheus.nodeMatch (uname, label:<name>, internal-ip) to how your "
                            "exporters are labelled, or deploy node_exporter on the missing nodes",
                        )
                    return f"all {len(nodes)} node(s) mapped ({settings.prometheus.node_match})"

                _check(results, "every node mapped to its series", all_mapped, "")
            if settings.learning.enabled:
                _check(
                    results,
                    "per-pod traffic for bandwidth learning",
                    lambda: _learning_inputs(source, settings.learning),
                    "",
                )
    else:
        results.append(Result("Prometheus reachable", True, "not configured: metrics-server only"))

    if settings.metrics_server.enabled:

        def metrics_available() -> str:
            usage = MetricsServerSource(api).fetch()
            return f"usage for {len(usage)} node(s)"

        _check(
            results,
            "metrics.k8s.io available",
            metrics_available,
            "install metrics-server, or set metricsServer.enabled: false",
        )
    return _report(results)


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


def _learning_inputs(source: PrometheusSource, learning: LearningSettings) -> str:
    report = PodTrafficSource(source, learning).fetch()
    if report.missing:
        names = {"cadvisor": "cAdvisor pod network", "kube-state-metrics": "kube-state-metrics"}
        raise Failed(
            f"no {' and no '.join(names[m] for m in report.missing)} series: pods are booked "
            "at steering.defaultPodBandwidth unless annotated",
            "; ".join(LEARNING_FIXES[m] for m in report.missing)
            + " (or set learning.enabled: false)",
        )
    workloads = {s.workload for s in report.samples if s.workload is not None}
    return f"{len(report.samples)} pod(s) of {len(workloads)} workload(s)"


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
