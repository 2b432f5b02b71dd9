"""Links of different speeds, end to end: node_exporter's
node_network_speed_bytes through a real Prometheus, the webhook and its
extender in real gunicorn over TLS, scoring.mode link-utilization. A node
ranks by its score with the pod's bytes on its link (docs/operations.md),
so a big pod leaves the quiet slow link and a small one would take it
(though with every link under half full it gets no term: nothing to gain)."""

import base64
import json

import jsonpatch
import pytest

from harness.fakeapi import node
from harness.prometheus import Device, Exporter
from harness.reviews import pod, review
from harness.webhook import WebhookProcess
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH, PREFERRED, PREFERRED_NODES
from tests.e2e.conftest import live_prometheus, node_file, webhook_config

GBIT = 1.25e8  # bytes/s
# node -> (link speed, bytes/s each way): 0.08%, 2% and 10% busy.
LINKS = {"slow": (GBIT, 1e5), "mid": (10 * GBIT, 2.5e7), "fast": (25 * GBIT, 3.125e8)}
# What a 100 MB/s pod adds: 80 points on "slow", 8 on "mid", 3.2 on "fast".
BIG, SMALL = "100M", "100k"


@pytest.fixture(scope="module")
def webhook(tmp_path_factory):
    exporters = [
        Exporter(f"10.4.0.{i}:9100", name, [Device("eth0", rate, rate, speed=speed)])
        for i, (name, (speed, rate)) in enumerate(LINKS.items())
    ]
    with live_prometheus(exporters) as prometheus:
        path = node_file(tmp_path_factory.mktemp("links"), "nodes.json", [node(n) for n in LINKS])
        config = webhook_config(prometheus.url, path, scoring={"mode": "link-utilization"})
        process = WebhookProcess(config)
        yield process
        process.stop()


def _expecting(bandwidth: str) -> dict:
    return pod(annotations={EXPECTED_BANDWIDTH: bandwidth})


def _choices(webhook: WebhookProcess, bandwidth: str) -> tuple[list[str], list[str]]:
    """The nodes ranked for a dry run (which books nothing), best first, and
    those of them that got a preferred term."""
    obj = _expecting(bandwidth)
    answer = webhook.post("/mutate", review(obj, dry_run=True))
    assert answer.status_code == 200, answer.text
    patch = json.loads(base64.b64decode(answer.json()["response"]["patch"]))
    patched = jsonpatch.apply_patch(obj, patch)
    ranked = patched["metadata"]["annotations"][PREFERRED_NODES].split(",")
    terms = ((patched["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED)
    termed = [
        term["preference"]["matchFields"][0]["values"][0]
        for term in terms or []
        if term["preference"].get("matchFields")
    ]
    return ranked, termed


def test_the_live_scores_rank_the_quiet_slow_link_first(webhook):
    scores = {
        n["name"]: n["score"] for n in webhook.session.get(webhook.url + "/scores").json()["nodes"]
    }
    assert scores["slow"] > scores["mid"] > scores["fast"]


def test_a_big_pod_leaves_the_slow_link_a_small_one_takes_it(webhook):
    # Without the pod's bytes on each link "slow" would come first for both.
    # The big pod fills "slow" to 80%: it ranks last. A pod that big is a
    # heavy burst by itself (scoring/savings.py): its terms weigh by rank
    # alone, the last a sixteenth of the first.
    assert _choices(webhook, BIG) == (["mid", "fast", "slow"], ["mid", "fast", "slow"])
    # Every link stays under half full with the small pod: nothing to gain,
    # no term; kube-scheduler places it as without us.
    assert _choices(webhook, SMALL) == (["slow", "mid", "fast"], [])


def test_the_extender_ranks_a_big_pod_as_the_webhook_does(webhook):
    args = {"Pod": _expecting(BIG), "Nodes": None, "NodeNames": list(LINKS)}
    answer = webhook.post("/scheduler/prioritize", args)
    assert answer.status_code == 200, answer.text
    scores = {p["Host"]: p["Score"] for p in answer.json()}
    assert scores["mid"] >= scores["fast"] > scores["slow"]
