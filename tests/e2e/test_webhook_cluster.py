"""The production wiring: the webhook reads nodes (list + watch), namespaces
and metrics-server from the API server (the fake one over HTTP), traffic from
the real Prometheus."""

import base64
import json
import re
import time

import jsonpatch
import pytest

from harness.fakeapi import FakeKubeAPI, node, node_metrics
from harness.reviews import pod, review
from harness.webhook import WebhookProcess
from kubectl_nettraffic.kube.nodes import ZONE_LABEL
from tests.conftest import wait_for
from tests.e2e.conftest import MIXED_RATES


@pytest.fixture
def cluster_webhook(prometheus, tmp_path, request):
    """The webhook over the fake API server; parametrized ``{"zones": True}``,
    each node in a zone of its own."""
    zones = getattr(request, "param", {}).get("zones", False)
    api = FakeKubeAPI()
    for name in MIXED_RATES:
        api.put(node(name, labels={ZONE_LABEL: f"zone-{name}"} if zones else None))
        api.put(node_metrics(name, "1", "2Gi"), plural="nodes")
    api.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    api.put(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "batch", "labels": {"nettraffic.io/skip": "true"}},
        }
    )
    config = {
        "kubeconfig": api.kubeconfig(str(tmp_path / "kubeconfig")),
        "prometheus": {"url": prometheus.url, "window": "10s"},
        "refresh": {"interval": "1s", "maxStaleness": "30s"},
    }
    webhook = WebhookProcess(config)
    yield api, webhook
    webhook.stop()
    api.stop()


def _preferred(webhook: WebhookProcess, obj: dict) -> tuple[list[str], dict]:
    answer = webhook.post("/mutate", review(obj, dry_run=True)).json()["response"]
    if "patch" not in answer:
        return [], obj
    patched = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(answer["patch"])))
    return (
        patched["metadata"]["annotations"].get("nettraffic.io/preferred-nodes", "").split(","),
        patched,
    )


def test_nodes_namespaces_and_usage_come_from_the_api(cluster_webhook):
    api, webhook = cluster_webhook
    nodes, _ = _preferred(webhook, pod())
    assert nodes == ["q1", "q2", "q3"]
    scores = webhook.session.get(webhook.url + "/scores").json()
    assert {n["name"]: n["cpuUsageRatio"] for n in scores["nodes"]}["q1"] == pytest.approx(0.25)

    # A namespace labelled nettraffic.io/skip=true is never touched.
    skipped, patched = _preferred(webhook, pod(namespace="batch"))
    assert skipped == [] and "annotations" not in patched["metadata"]
    metrics = webhook.session.get(webhook.url + "/metrics").text
    assert 'nettraffic_skips_total{reason="namespace-skip-label"} 1' in metrics

    # The node watch follows the cluster: cordon q1 and it stops being offered.
    cordoned = node("q1", unschedulable=True)
    api.put(cordoned)
    wait_for(lambda: "q1" not in _preferred(webhook, pod())[0], timeout=15)
    q1 = next(
        n for n in webhook.session.get(webhook.url + "/scores").json()["nodes"] if n["name"] == "q1"
    )
    assert q1["eligible"] is False and q1["reason"] == "cordoned (unschedulable)"
    assert any(r.query.get("watch") == ["true"] for r in api.requests if r.path == "/api/v1/nodes")


@pytest.mark.parametrize("cluster_webhook", [{"zones": True}], indirect=True)
def test_a_steered_pod_s_booking_follows_its_binding(cluster_webhook):
    api, webhook = cluster_webhook
    heavy = pod(annotations={"nettraffic.io/expected-bandwidth": "100Mi"})
    admitted = time.time()
    answer = webhook.post("/mutate", review(heavy)).json()["response"]
    steered = jsonpatch.apply_patch(heavy, json.loads(base64.b64decode(answer["patch"])))
    first = steered["metadata"]["annotations"]["nettraffic.io/preferred-nodes"].split(",")[0]
    replica = steered["metadata"]["labels"]["nettraffic.io/steered-by"]
    assert steered["metadata"]["annotations"]["nettraffic.io/booking"].isdigit()

    def inflight() -> dict[str, int]:
        nodes = webhook.session.get(webhook.url + "/scores").json()["nodes"]
        return {n["name"]: n["inflightPods"] for n in nodes if n["inflightPods"]}

    assert inflight() == {first: 1}
    # The API server stores the pod; the scheduler binds it to another node.
    steered.update(apiVersion="v1", kind="Pod")
    steered["metadata"]["name"] = "web-1"
    bound = next(name for name in MIXED_RATES if name != first)
    steered["spec"]["nodeName"] = bound
    api.put(steered)
    wait_for(lambda: inflight() == {bound: 1}, timeout=15)
    metrics = webhook.session.get(webhook.url + "/metrics").text
    assert 'nettraffic_bookings_followed_total{outcome="moved"} 1' in metrics
    # Its own pod: followed, not booked a second time as another replica's.
    assert 'nettraffic_bookings_followed_total{outcome="seen"} 0' in metrics
    # The node it was booked on declined it; it was bound in another zone.
    assert "\nnettraffic_declined_nodes_total 1\n" in metrics
    assert "\nnettraffic_bindings_off_zone_ratio 1\n" in metrics
    assert "\nnettraffic_admitted_pods_never_shown_total 0\n" in metrics  # it was shown
    # ... and timed: the watch's delay moved a tenth of the way from the
    # 50 ms assumed to what this pod took, at most the time since its admission.
    delay = float(re.search(r"^nettraffic_binding_watch_delay_seconds (\S+)$", metrics, re.M)[1])
    assert delay != 0.05
    assert 0.045 <= delay <= 0.05 + 0.1 * (time.time() - admitted)
    assert replica and len(replica) == 10
    watches = [r for r in api.requests if r.path == "/api/v1/pods" and r.query.get("watch")]
    selectors = {r.query["labelSelector"][0] for r in watches}
    assert selectors == {"nettraffic.io/steered-by", "!nettraffic.io/steered-by"}
    # A pod it never steered (one that ran before the install), once bound,
    # counts in its workload's spread: the second watch.
    legacy = pod(name="web-0")
    legacy["spec"]["nodeName"] = bound
    api.put(legacy)

    def counted() -> str:
        metrics = webhook.session.get(webhook.url + "/metrics").text
        found = re.search(r"^nettraffic_unsteered_pods_counted (\S+)$", metrics, re.M)
        return found[1] if found else ""

    wait_for(lambda: counted() == "1", timeout=15)


def test_the_leader_labels_nodes_by_tier_and_pods_prefer_the_quiet_tiers(cluster_webhook):
    api, webhook = cluster_webhook

    def tiers() -> dict[str, str | None]:
        return {
            name: (api.get(("api/v1", None, "nodes"), name)["metadata"].get("labels") or {}).get(
                "nettraffic.io/traffic-tier"
            )
            for name in MIXED_RATES
        }

    # The refresher process won the Lease and labelled every node by rank.
    wait_for(lambda: all(tiers().values()), timeout=20)
    assert tiers() == {"q1": "1", "q2": "3", "q3": "4"}  # ranks 1-3 of 3: middles 1/6, 1/2, 5/6
    lease = api.get(("apis/coordination.k8s.io/v1", "default", "leases"), "nettraffic-tier-labels")
    assert lease["spec"]["holderIdentity"]
    # /scores shows each node's tier once the node list has the labels.
    wait_for(
        lambda: (
            {
                n["name"]: n["tier"]
                for n in webhook.session.get(webhook.url + "/scores").json()["nodes"]
            }
            == tiers()
        ),
        timeout=15,
    )
    metrics = webhook.session.get(webhook.url + "/metrics").text
    assert "nettraffic_tier_labels_leader 1" in metrics
    assert 'nettraffic_tier_label_writes_total{outcome="written"} 3' in metrics
    # Only label patches reached the nodes.
    patches = [
        r for r in api.requests if r.method == "PATCH" and r.path.startswith("/api/v1/nodes/")
    ]
    assert len(patches) == 3
    assert all(set(r.body["metadata"]["labels"]) == {"nettraffic.io/traffic-tier"} for r in patches)
    # A steered pod of unknown size (nothing learned, no annotation) is
    # steered in full: it also prefers the quiet tiers by rank.
    _, patched = _preferred(webhook, pod())
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert [
        (t["weight"], t["preference"]["matchExpressions"][0]["values"])
        for t in terms
        if "matchExpressions" in t["preference"]
    ] == [(60, ["1"]), (40, ["2"]), (20, ["3"])]


def test_a_stopped_webhook_releases_the_tier_labels_lease(cluster_webhook):
    # Stopped as Kubernetes stops a pod (SIGTERM), the leader hands the Lease
    # back, so the next replica leads at its next try instead of 15 s later.
    api, webhook = cluster_webhook
    leases = ("apis/coordination.k8s.io/v1", "default", "leases")
    wait_for(lambda: (api.get(leases, "nettraffic-tier-labels") or {}).get("spec"), timeout=20)
    held = api.get(leases, "nettraffic-tier-labels")["spec"]
    assert held["holderIdentity"]
    webhook.stop()
    released = api.get(leases, "nettraffic-tier-labels")["spec"]
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
