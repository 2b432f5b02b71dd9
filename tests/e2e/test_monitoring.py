"""The chart's alerts and dashboard against real Prometheus: the rules pass
``promtool check rules`` and load; every dashboard query returns data from a
Prometheus that scrapes the running webhook's /metrics over TLS, labelled
as the chart's ServiceMonitor labels them."""

import json
import os
import shutil
import subprocess
import time

import pytest
import requests
import yaml

from harness.fakeapi import node
from harness.prometheus import PrometheusServer
from harness.reviews import pod, review
from harness.webhook import WebhookProcess
from kubectl_nettraffic.kube.nodes import ZONE_LABEL
from tests.e2e.conftest import MIXED_RATES
from tests.e2e.conftest import node_file as _node_file
from tests.e2e.conftest import webhook_config as _config
from tests.harness.flow_series import Flow
from tests.harness.kube_series import PodSeries, ReplicaSetSeries
from tests.harness.live_workloads import LiveWorkloads
from tests.test_chart import CHART, IMAGE, by_kind, render

pytestmark = pytest.mark.skipif(
    shutil.which("helm") is None or shutil.which("promtool") is None,
    reason="helm or promtool not on PATH (run through .ci/test)",
)

PODS = [
    PodSeries("shop", "web-7d9c4b-a1", 1e6, 1e6, "ReplicaSet", "web-7d9c4b", node="q1"),
    PodSeries("shop", "api-6c8d9f-c3", 2e6, 2e6, "ReplicaSet", "api-6c8d9f", node="q3"),
]
REPLICASETS = [
    ReplicaSetSeries("shop", "web-7d9c4b", "web"),
    ReplicaSetSeries("shop", "api-6c8d9f", "api"),
]
FLOWS = [Flow(("shop", "web"), ("shop", "api"), tcp_sent=3e6, tcp_received=1e6)]

# As `helm template nt ... -n nettraffic` names the release's Service.
JOB, NAMESPACE = "nt-nettraffic", "nettraffic"


@pytest.fixture(scope="module")
def rendered():
    objects = render("helm", "-f", os.path.join(CHART, "ci", "monitoring-values.yaml"))
    rules = by_kind(objects, "PrometheusRule")[0]["spec"]
    dashboard = json.loads(by_kind(objects, "ConfigMap")[-1]["data"]["nettraffic.json"])
    return rules, dashboard


def _expressions(dashboard: dict) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel["targets"]
    ]


def test_the_dashboard_is_a_labelled_configmap_in_the_chosen_namespace():
    objects = render("helm", "-f", os.path.join(CHART, "ci", "monitoring-values.yaml"))
    configmap = next(o for o in by_kind(objects, "ConfigMap") if "nettraffic.json" in o["data"])
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["metadata"]["namespace"] == "monitoring"
    assert not by_kind(render(), "PrometheusRule")  # off unless asked for


def test_promtool_accepts_the_rules(rendered, tmp_path):
    rules, _ = rendered
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    result = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    names = {rule["alert"] for group in rules["groups"] for rule in group["rules"]}
    assert names == {
        "NettrafficWebhookDown",
        "NettrafficSnapshotStale",
        "NettrafficRefreshFailing",
        "NettrafficAdmissionErrors",
        "NettrafficServingCertificateExpiring",
        "NettrafficTierLabelsRefused",
        "NettrafficNoTierLabeller",
    }


def _query(prometheus: PrometheusServer, expr: str) -> list:
    answer = requests.get(f"{prometheus.url}/api/v1/query", params={"query": expr}, timeout=10)
    body = answer.json()
    assert body["status"] == "success", (expr, body)
    return body["data"]["result"]


def _exercise(webhook: WebhookProcess) -> None:
    """Something behind every panel: admissions of each kind, an extender
    call, a request the front refuses."""
    for i in range(5):
        webhook.post("/mutate", review(pod(f"web-{i}-")))
    webhook.post("/mutate", review(pod(spec={"nodeName": "q1"})))  # skipped
    webhook.post("/scheduler/prioritize", {"Pod": pod(), "NodeNames": list(MIXED_RATES)})
    webhook.session.post(
        webhook.url + "/mutate", data=b"{}", headers={"Transfer-Encoding": "chunked"}, timeout=5
    )  # refused-411


def test_every_dashboard_query_returns_data_and_every_alert_evaluates(
    prometheus, rendered, tmp_path
):
    rules, dashboard = rendered
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(yaml.safe_dump(rules))
    zones = {"q1": "zone-a", "q2": "zone-a", "q3": "zone-b"}
    labelled = [node(n, labels={ZONE_LABEL: zones[n]}) for n in MIXED_RATES]
    nodes = _node_file(tmp_path, "nodes.json", labelled)
    # Pods and the flows between their workloads, for the peers panel: the
    # webhook's learner reads them (peers.source istio) beside the nodes.
    workloads = LiveWorkloads(PODS, REPLICASETS, FLOWS)
    source = PrometheusServer(
        scrape_targets=[prometheus.exporter_target],
        scrape_interval="1s",
        scrape_configs=[
            {
                "job_name": "workloads",
                "honor_labels": True,
                "scrape_interval": "1s",
                "static_configs": [{"targets": [workloads.target]}],
            }
        ],
    )
    webhook = None
    scraper = None
    try:
        time.sleep(12)  # the 10s rate window filled
        config = _config(source.url, nodes, peers={"source": "istio"}, learning={"interval": "1s"})
        webhook = WebhookProcess(config)
        _exercise(webhook)
        scraper = PrometheusServer(
            scrape_interval="1s",
            rule_files=[str(rule_file)],
            scrape_configs=[
                {
                    "job_name": JOB,
                    "scheme": "https",
                    "tls_config": {"ca_file": webhook.ca_file, "server_name": "localhost"},
                    "static_configs": [
                        {
                            "targets": [f"127.0.0.1:{webhook.port}"],
                            "labels": {"namespace": NAMESPACE, "pod": "nt-nettraffic-0"},
                        }
                    ],
                }
            ],
        )
        time.sleep(3)  # a few scrapes, so rate() has two samples
        _exercise(webhook)
        deadline = time.monotonic() + 60
        while True:
            empty = [title for title, expr in _expressions(dashboard) if not _query(scraper, expr)]
            if not empty:
                break
            assert time.monotonic() < deadline, f"panels without data: {empty}"
            time.sleep(1)
        groups = requests.get(f"{scraper.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
        loaded = [rule for group in groups for rule in group["rules"]]
        assert len(loaded) == 7
        for rule in loaded:
            _query(scraper, rule["query"])  # evaluates
            assert rule["health"] in ("ok", "unknown"), rule
        # A healthy webhook with a fresh certificate fires nothing.
        assert all(rule["state"] == "inactive" for rule in loaded), loaded
    finally:
        if scraper is not None:
            scraper.stop()
        if webhook is not None:
            webhook.stop()
        source.stop()
        workloads.stop()


def test_the_webhook_down_alert_fires_when_no_replica_is_scraped(rendered, tmp_path):
    """The down alert's expression on a Prometheus whose only target of the
    job does not answer (the alert's `for` is left to Prometheus)."""
    rules, _ = rendered
    down = next(
        rule
        for group in rules["groups"]
        for rule in group["rules"]
        if rule["alert"] == "NettrafficWebhookDown"
    )
    scraper = PrometheusServer(
        scrape_interval="1s",
        scrape_configs=[
            {
                "job_name": JOB,
                "static_configs": [
                    {"targets": ["127.0.0.1:9"], "labels": {"namespace": NAMESPACE}}
                ],
            }
        ],
    )
    try:
        deadline = time.monotonic() + 15
        while not _query(scraper, f'up{{job="{JOB}"}}'):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert _query(scraper, down["expr"])  # fires
        # Its selector does match the scraped series: on "down" they exist.
        assert not _query(scraper, down["expr"].replace("== 1", "== 0"))
    finally:
        scraper.stop()


def test_the_expiry_threshold_follows_its_value():
    objects = render("helm", *IMAGE, "--set", "prometheusRule.enabled=true",
                     "--set", "prometheusRule.certificateExpiryDays=30")  # fmt: skip
    expressions = [
        rule["expr"]
        for group in by_kind(objects, "PrometheusRule")[0]["spec"]["groups"]
        for rule in group["rules"]
    ]
    assert any("2592000" in expr for expr in expressions)
