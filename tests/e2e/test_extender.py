"""kube-scheduler extender endpoints through the real gunicorn server over TLS,
with requests shaped as kube-scheduler's HTTPExtender sends them (Go field
names, nil pointers as null), in both node-cache modes."""

import socket

import pytest

from harness.fakeapi import node
from harness.reviews import pod
from harness.webhook import WebhookProcess
from tests.e2e.conftest import MIXED_RATES, node_file, webhook_config

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}


def _nodes() -> list[dict]:
    objects = [node(name) for name in MIXED_RATES]
    objects.append(node("t1", taints=[TAINT]))
    return objects


@pytest.fixture(scope="module")
def extender(prometheus, tmp_path_factory):
    path = node_file(tmp_path_factory.mktemp("ext"), "nodes.json", _nodes())
    config = webhook_config(prometheus.url, path, extender={"maxTrafficBytesPerSecond": "5M"})
    webhook = WebhookProcess(config)
    yield webhook
    webhook.stop()


def _args(cache_capable: bool, names: list[str], the_pod: dict | None = None) -> dict:
    the_pod = the_pod or pod(name="web-abc12")
    if cache_capable:
        return {"Pod": the_pod, "Nodes": None, "NodeNames": names}
    by_name = {n["metadata"]["name"]: n for n in _nodes()}
    items = [by_name.get(name, node(name)) for name in names]
    return {
        "Pod": the_pod,
        "Nodes": {"metadata": {"resourceVersion": "42"}, "items": items},
        "NodeNames": None,
    }


@pytest.mark.parametrize("cache_capable", [True, False])
def test_filter_drops_with_reasons_and_answers_in_the_form_asked(extender, cache_capable):
    names = ["q1", "q2", "q3", "t1", "unknown-node"]
    answer = extender.post("/scheduler/filter", _args(cache_capable, names))
    assert answer.status_code == 200
    result = answer.json()
    assert set(result) == {
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    }
    assert result["Error"] == ""
    scores = extender.session.get(extender.url + "/scores").json()
    assert "above the extender limit" in result["FailedNodes"].get("q3", ""), scores  # 6 MB/s > 5M
    assert "tainted dedicated=gpu:NoSchedule" in result["FailedAndUnresolvableNodes"]["t1"]
    kept = ["q1", "q2", "unknown-node"]  # a node we know nothing of: no opinion
    if cache_capable:
        assert result["NodeNames"] == kept and result["Nodes"] is None
    else:
        assert result["NodeNames"] is None
        assert [n["metadata"]["name"] for n in result["Nodes"]["items"]] == kept
        assert result["Nodes"]["metadata"] == {"resourceVersion": "42"}


def test_filter_keeps_a_tainted_node_the_pod_tolerates(extender):
    tolerant = pod(
        name="gpu-job", spec={"tolerations": [{"key": "dedicated", "operator": "Exists"}]}
    )
    result = extender.post("/scheduler/filter", _args(True, ["t1", "q1"], tolerant)).json()
    assert result["NodeNames"] == ["t1", "q1"] and result["FailedAndUnresolvableNodes"] == {}


@pytest.mark.parametrize("cache_capable", [True, False])
def test_prioritize_scores_0_to_10_from_the_same_scores(extender, cache_capable):
    answer = extender.post("/scheduler/prioritize", _args(cache_capable, ["q3", "q2", "q1"]))
    assert answer.status_code == 200
    priorities = answer.json()
    assert [p["Host"] for p in priorities] == ["q3", "q2", "q1"]  # the order given
    scores = {p["Host"]: p["Score"] for p in priorities}
    assert all(isinstance(s, int) and 0 <= s <= 10 for s in scores.values())
    assert scores["q1"] > scores["q2"] > scores["q3"]
    live = {
        n["name"]: n["score"]
        for n in extender.session.get(extender.url + "/scores").json()["nodes"]
    }
    assert scores["q1"] == round(live["q1"] / 10)


@pytest.mark.parametrize(
    ("path", "body", "message"),
    [
        (
            "/scheduler/filter",
            {"Pod": {}, "Nodes": None, "NodeNames": None},
            "neither Nodes nor NodeNames",
        ),
        ("/scheduler/prioritize", {"Nodes": None, "NodeNames": ["a"]}, "Pod is missing"),
        ("/scheduler/filter", {"Pod": {}, "NodeNames": "a,b"}, "not a list of node names"),
        ("/scheduler/filter", [], "not a JSON object"),
    ],
)
def test_bad_input(extender, path, body, message):
    answer = extender.post(path, body)
    assert answer.status_code == 400
    assert message in answer.json()["Error"] and message in answer.json()["error"]


def test_no_data_means_no_opinion(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    config = webhook_config(
        f"http://127.0.0.1:{listener.getsockname()[1]}", node_file(tmp_path, "n.json", _nodes())
    )
    webhook = WebhookProcess(config, wait_ready=False)
    try:
        result = webhook.post("/scheduler/filter", _args(True, ["q1", "t1"])).json()
        assert result["NodeNames"] == ["q1", "t1"] and not result["FailedNodes"]
        priorities = webhook.post("/scheduler/prioritize", _args(True, ["q1", "q3"])).json()
        assert len({p["Score"] for p in priorities}) == 1
        metrics = webhook.session.get(webhook.url + "/metrics").text
        assert 'nettraffic_extender_requests_total{verb="filter",outcome="degraded"} 1' in metrics
        assert (
            'nettraffic_extender_requests_total{verb="prioritize",outcome="degraded"} 1' in metrics
        )
    finally:
        webhook.stop()
        listener.close()
