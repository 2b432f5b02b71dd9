"""Learned bandwidth end to end: the webhook under gunicorn, its refresher
reading node traffic and per-pod traffic (cAdvisor and kube-state-metrics
series, backfilled into the real Prometheus) in one refresh, and a pod
without an annotation booked at what its workload's pods send."""

import base64
import json
import time

import jsonpatch
import pytest

from harness.fakeapi import node
from harness.prometheus import Device, Exporter, prometheus_with_history
from harness.reviews import pod, review
from harness.webhook import WebhookProcess
from tests.conftest import wait_for
from tests.e2e.conftest import node_file, webhook_config
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, kube_lines

NODES = ("l1", "l2", "l3")
WEB_RATE = 40e6  # bytes/s per pod, receive and transmit together
PODS = [
    PodSeries(
        "shop", f"web-7d9c4b-{i}", WEB_RATE * 0.75, WEB_RATE * 0.25, "ReplicaSet", "web-7d9c4b"
    )
    for i in range(3)
] + [PodSeries("shop", f"db-{i}", 1e6, 1e6, "StatefulSet", "db") for i in range(3)]


@pytest.fixture(scope="module")
def learning_webhook(tmp_path_factory):
    end = float(int(time.time()) + 600)
    exporters = [
        Exporter(f"10.5.0.{i}:9100", name, [Device("eth0", 1e6 * (i + 1), 1e6)])
        for i, name in enumerate(NODES)
    ]
    more = list(kube_lines(PODS, [ReplicaSetSeries("shop", "web-7d9c4b", "web")], end, 900))
    server = prometheus_with_history(exporters, end, duration=900, more=more)
    nodes = node_file(tmp_path_factory.mktemp("learning"), "nodes.json", [node(n) for n in NODES])
    config = webhook_config(server.url, nodes, prometheus={"window": "2m"})
    webhook = WebhookProcess(config)
    yield webhook
    webhook.stop()
    server.stop()


def _admit(webhook, admitted):
    answer = webhook.post("/mutate", review(admitted)).json()["response"]
    steered = jsonpatch.apply_patch(admitted, json.loads(base64.b64decode(answer["patch"])))
    return steered["metadata"]["annotations"]


def _inflight(webhook):
    nodes = webhook.session.get(webhook.url + "/scores").json()["nodes"]
    return {n["name"]: n["inflightBytesPerSecond"] for n in nodes if n["inflightPods"]}


def test_a_deployment_pod_is_booked_at_its_workload_s_learned_figure(learning_webhook):
    web_pod = pod(
        generate_name="web-7d9c4b-",
        namespace="shop",
        labels={"app": "web", "pod-template-hash": "7d9c4b"},
    )
    web_pod["metadata"]["ownerReferences"][0]["name"] = "web-7d9c4b"

    def learned() -> dict | None:
        annotations = _admit(learning_webhook, web_pod)
        return annotations if annotations["nettraffic.io/bandwidth-source"] == "workload" else None

    annotations = wait_for(learned, timeout=20)
    booked = float(annotations["nettraffic.io/booked-bandwidth"])
    assert booked == pytest.approx(WEB_RATE * 1.15, rel=0.06)  # p90 + 15%, 5% buckets
    first = annotations["nettraffic.io/preferred-nodes"].split(",")[0]
    assert _inflight(learning_webhook)[first] >= booked  # /scores shows what was booked


def test_a_pod_of_an_unknown_workload_is_booked_at_the_cluster_wide_figure(learning_webhook):
    stranger = pod(generate_name="new-app-", owner_kind="StatefulSet")
    wait_for(
        lambda: _admit(learning_webhook, stranger)["nettraffic.io/bandwidth-source"] == "cluster",
        timeout=20,
    )
    annotations = _admit(learning_webhook, stranger)
    # The mean of all six pods' samples (three web pods, three db pods at 2 MB/s).
    assert float(annotations["nettraffic.io/booked-bandwidth"]) == pytest.approx(
        (3 * WEB_RATE + 3 * 2e6) / 6, rel=0.06
    )
    # Its own annotation still wins.
    annotated = pod(annotations={"nettraffic.io/expected-bandwidth": "5Mi"})
    annotations = _admit(learning_webhook, annotated)
    assert annotations["nettraffic.io/bandwidth-source"] == "annotation"
    assert annotations["nettraffic.io/booked-bandwidth"] == str(5 * 2**20)


def test_the_learned_table_is_served(learning_webhook):
    wait_for(
        lambda: learning_webhook.session.get(learning_webhook.url + "/workloads").json()[
            "workloads"
        ],
        timeout=20,
    )
    document = learning_webhook.session.get(learning_webhook.url + "/workloads").json()
    rows = {(r["namespace"], r["kind"], r["name"]): r for r in document["workloads"]}
    assert rows[("shop", "Deployment", "web")]["learnedBytesPerSecond"] == pytest.approx(
        WEB_RATE * 1.15, rel=0.06
    )
    assert rows[("shop", "StatefulSet", "db")]["learnedBytesPerSecond"] == pytest.approx(
        2e6 * 1.15, rel=0.06
    )
    assert document["learning"] is True and document["missing"] == []


def test_the_learner_s_rounds_and_passes_are_on_metrics(learning_webhook):
    def samples() -> dict[str, float] | None:
        text = learning_webhook.session.get(learning_webhook.url + "/metrics").text
        found = {
            line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("nettraffic_learner_")
        }
        return found if found.get("nettraffic_learner_passes_total", 0) >= 1 else None

    found = wait_for(samples, timeout=20)
    # Six pods: the whole cluster in one slice a pass, and no young rounds
    # (they run only while the cluster is read in slices) nor pairs (no flow source).
    assert found['nettraffic_learner_rounds_total{round="slice"}'] >= 1
    assert found['nettraffic_learner_query_seconds_total{round="slice"}'] > 0
    assert not any('round="young"' in key or 'round="peers"' in key for key in found)
    assert found["nettraffic_learner_pass_slices"] == 1
    assert found["nettraffic_learner_pass_slices_read"] == 0
