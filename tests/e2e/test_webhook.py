"""The webhook as deployed: real gunicorn over real TLS, real Prometheus
scraping a live exporter, AdmissionReviews shaped as the API server sends them."""

import base64
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import warnings
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import jsonpatch
import pytest
import requests

from harness.fakeapi import node
from harness.reviews import pod, review
from harness.webhook import WebhookProcess
from kubectl_nettraffic.tls.cert_files import write_files
from kubectl_nettraffic.tls.certs import Issuance
from tests.conftest import wait_for
from tests.e2e.conftest import (
    EQUAL,
    MIXED_RATES,
)
from tests.e2e.conftest import (
    node_file as _node_file,
)
from tests.e2e.conftest import (
    webhook_config as _config,
)


@pytest.fixture(scope="module")
def equal_webhook(prometheus, tmp_path_factory):
    nodes = [node(n, labels={"zone": "a" if i % 2 else "b"}) for i, n in enumerate(EQUAL)]
    path = _node_file(tmp_path_factory.mktemp("nodes"), "equal.json", nodes)
    webhook = WebhookProcess(_config(prometheus.url, path))
    yield webhook
    webhook.stop()


def _mixed_webhook(prometheus, directory) -> WebhookProcess:
    nodes = [node(n, labels={"tier": "fast" if n == "q3" else "std"}) for n in MIXED_RATES]
    nodes.append(node("t1", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    return WebhookProcess(_config(prometheus.url, _node_file(directory, "mixed.json", nodes)))


@pytest.fixture(scope="module")
def mixed_webhook(prometheus, tmp_path_factory):
    """Shared: tests that depend on node order send dry runs, which book nothing."""
    webhook = _mixed_webhook(prometheus, tmp_path_factory.mktemp("mixed"))
    yield webhook
    webhook.stop()


@pytest.fixture
def fresh_webhook(prometheus, tmp_path):
    """A webhook of its own, for tests that count bookings or metrics exactly."""
    webhook = _mixed_webhook(prometheus, tmp_path)
    yield webhook
    webhook.stop()


def _admit(webhook: WebhookProcess, obj: dict, **kwargs) -> tuple[dict, dict, dict]:
    """Post a review; return (response JSON, patched pod, response.response)."""
    sent = review(obj, **kwargs)
    answer = webhook.post("/mutate", sent)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    assert body["response"]["uid"] == sent["request"]["uid"]
    assert body["response"]["allowed"] is True
    patched = obj
    if "patch" in body["response"]:
        assert body["response"]["patchType"] == "JSONPatch"
        patch = json.loads(base64.b64decode(body["response"]["patch"]))
        patched = jsonpatch.apply_patch(obj, patch)
    return body, patched, body["response"]


def _preferred(patched: dict) -> list[tuple[str, int]]:
    terms = patched["spec"]["affinity"]["nodeAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    ours = []
    for term in terms:
        fields = term["preference"].get("matchFields") or []
        if fields and fields[0]["key"] == "metadata.name":
            assert fields[0]["operator"] == "In" and len(fields[0]["values"]) == 1
            ours.append((fields[0]["values"][0], term["weight"]))
    return ours


def _ranked(patched: dict) -> list[str]:
    """The nodes the webhook ranked best for the pod, best first (the first is booked)."""
    return patched["metadata"]["annotations"]["nettraffic.io/preferred-nodes"].split(",")


def test_generate_name_pod_gets_top_three_and_annotations(fresh_webhook):
    _body, patched, _response = _admit(fresh_webhook, pod())
    # t1 is tainted, the pod does not tolerate it.
    assert _ranked(patched) == ["q1", "q2", "q3"]
    # Nothing learned of the pod: its size unknown, it is steered in full,
    # weighed by rank alone (100, then at most a quarter of the one before).
    # (Known, it would be too: traffic mode without link speeds counts the
    # busiest node as full, and 1Mi fills 17.5% more, past a heavy burst's
    # 5%; scoring/savings.py. The saving's weights: tests/test_placement.py.)
    assert _preferred(patched) == [("q1", 100), ("q2", 25), ("q3", 6)]
    annotations = patched["metadata"]["annotations"]
    assert annotations["nettraffic.io/source"] == "prometheus"
    assert annotations["nettraffic.io/scored-at"].endswith("Z")


AFFINITY_SHAPES = {
    "none": None,
    "empty": {},
    "empty-node-affinity": {"nodeAffinity": {}},
    "required-only": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "tier", "operator": "In", "values": ["std", "fast"]}
                        ]
                    }
                ]
            }
        }
    },
    "preferred-only": {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 7,
                    "preference": {
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fast"]}]
                    },
                }
            ]
        }
    },
    "pod-anti-affinity-only": {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    },
    "pod-affinity-only": {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "topology.kubernetes.io/zone",
                }
            ]
        }
    },
}


@pytest.mark.parametrize("shape", sorted(AFFINITY_SHAPES))
def test_existing_affinity_is_kept_and_ours_appended(mixed_webhook, shape):
    spec = {} if AFFINITY_SHAPES[shape] is None else {"affinity": AFFINITY_SHAPES[shape]}
    original = pod(spec=spec)
    _, patched, _ = _admit(mixed_webhook, original, dry_run=True)
    assert len(_preferred(patched)) == 3
    before = original["spec"].get("affinity") or {}
    after = patched["spec"]["affinity"]
    for key in ("podAffinity", "podAntiAffinity"):
        assert after.get(key) == before.get(key)
    node_before = before.get("nodeAffinity") or {}
    node_after = after["nodeAffinity"]
    assert node_after.get("requiredDuringSchedulingIgnoredDuringExecution") == node_before.get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    existing = node_before.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    assert (
        node_after["preferredDuringSchedulingIgnoredDuringExecution"][: len(existing)] == existing
    )


def test_reinvocation_adds_nothing_twice(mixed_webhook):
    _, once, _ = _admit(mixed_webhook, pod())
    _, twice, response = _admit(mixed_webhook, once)
    assert "patch" not in response
    assert twice == once


def test_constraints_are_honoured(mixed_webhook):
    _, patched, _ = _admit(
        mixed_webhook, pod(spec={"nodeSelector": {"tier": "fast"}}), dry_run=True
    )
    assert _ranked(patched) == ["q3"]  # the only node it fits, and no better than the field
    required = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "NotIn", "values": ["q1"]}
                        ]
                    }
                ]
            }
        }
    }
    _, patched, _ = _admit(mixed_webhook, pod(spec={"affinity": required}), dry_run=True)
    assert "q1" not in _ranked(patched)
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    _, patched, _ = _admit(mixed_webhook, pod(spec={"tolerations": [toleration]}), dry_run=True)
    assert _preferred(patched)[0][0] == "t1"  # idle and tolerated


def test_no_candidate_is_a_soft_skip_written_on_the_pod(mixed_webhook):
    _, patched, response = _admit(mixed_webhook, pod(spec={"nodeSelector": {"tier": "none"}}))
    assert patched["metadata"]["annotations"]["nettraffic.io/skipped"] == "no-candidate"
    assert "affinity" not in patched["spec"]
    assert any("no eligible node" in w for w in response["warnings"])


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        (pod(spec={"nodeName": "q1"}), "node-name-set"),
        (pod(annotations={"kubernetes.io/config.mirror": "abc"}, owner_kind=None), "mirror-pod"),
        (pod(owner_kind="DaemonSet"), "daemonset"),
        (pod(labels={"nettraffic.io/skip": "true"}), "skip-label"),
        (pod(spec={"schedulerName": "volcano"}), "scheduler-name"),
    ],
)
def test_untouchable_pods_get_no_patch_and_a_counted_reason(mixed_webhook, obj, reason):
    # Each reason occurs once in this module, so its counter reads exactly 1.
    _, patched, response = _admit(mixed_webhook, obj)
    assert "patch" not in response and patched == obj
    metrics = mixed_webhook.session.get(mixed_webhook.url + "/metrics").text
    assert f'nettraffic_skips_total{{reason="{reason}"}} 1' in metrics


def test_other_operations_and_kinds_are_allowed_unpatched(mixed_webhook):
    obj = pod(name="web-0", owner_kind="StatefulSet")
    for operation in ("UPDATE", "DELETE", "CONNECT"):
        _, _, response = _admit(mixed_webhook, obj, operation=operation, old=obj)
        assert "patch" not in response


def test_dry_run_is_answered_but_books_nothing(fresh_webhook):
    for _ in range(5):
        _, patched, _ = _admit(
            fresh_webhook,
            pod(annotations={"nettraffic.io/expected-bandwidth": "50Mi"}),
            dry_run=True,
        )
        assert _preferred(patched)[0][0] == "q1"
    scores = fresh_webhook.session.get(fresh_webhook.url + "/scores").json()
    assert all(n["inflightPods"] == 0 for n in scores["nodes"])


def test_water_filling_over_unequal_nodes(fresh_webhook):
    """q1 (1 MB/s) fills first; once it reaches q2 (3 MB/s) they share, then
    q3 (6 MB/s) joins. Each pod is of a workload of its own: one workload's
    pods would keep its spread (at most 3 on a node: tests/test_spread.py)."""
    firsts = []
    for index in range(9):
        _, patched, _ = _admit(
            fresh_webhook,
            pod(
                generate_name=f"web{index}-7d9c4b-",
                annotations={"nettraffic.io/expected-bandwidth": "1M"},
            ),
        )
        firsts.append(_ranked(patched)[0])
    # 1 MB/s per pod: q1 takes 2 pods to reach q2's 3 MB/s, the two then
    # alternate to 6 MB/s (3 each), then all three share.
    assert firsts[:2] == ["q1", "q1"]
    assert Counter(firsts[:8]) == Counter({"q1": 5, "q2": 3})
    load = {
        "q1": 1 + firsts.count("q1"),
        "q2": 3 + firsts.count("q2"),
        "q3": 6 + firsts.count("q3"),
    }
    assert max(load.values()) - min(load.values()) <= 1.0 + 1e-9


def test_burst_of_100_pods_spreads_over_10_equal_nodes(equal_webhook):
    def admit(_: int) -> str:
        sent = review(pod())
        response = equal_webhook.post("/mutate", sent).json()["response"]
        patch = json.loads(base64.b64decode(response["patch"]))
        return _ranked(jsonpatch.apply_patch(sent["request"]["object"], patch))[0]

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        firsts = list(pool.map(admit, range(100)))
    assert time.monotonic() - started < 5
    counts = Counter(firsts)
    assert len(counts) == 10 and max(counts.values()) <= 15, counts


@pytest.mark.parametrize(
    ("body", "headers", "status", "message"),
    [
        (b"{not json", {"Content-Type": "application/json"}, 400, "body is not valid JSON"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            {"Content-Type": "application/json"},
            400,
            "no request object",
        ),
        (
            json.dumps(
                {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}
            ).encode(),
            {"Content-Type": "application/json"},
            400,
            "request.uid is missing",
        ),
        (
            json.dumps(
                {
                    "apiVersion": "admission.k8s.io/v1beta1",
                    "kind": "AdmissionReview",
                    "request": {"uid": "x"},
                }
            ).encode(),
            {"Content-Type": "application/json"},
            400,
            "admissionReviewVersions: [v1]",
        ),
        (
            json.dumps(
                review({"apiVersion": "v1", "kind": "Service", "metadata": {}, "spec": {}})
            ).encode(),
            {"Content-Type": "application/json"},
            400,
            "not a Pod",
        ),
        (b"{}", {"Content-Type": "text/plain"}, 415, "send application/json"),
        (b"{}", {}, 415, "Content-Type '(none)' is not supported"),
        (b"[]", {"Content-Type": "application/json"}, 400, "not a JSON object"),
        # Media types are case-insensitive and may carry parameters: past the 415 check.
        (b"[]", {"Content-Type": "Application/JSON; charset=utf-8"}, 400, "not a JSON object"),
    ],
)
def test_bad_input_gets_a_clear_json_error(mixed_webhook, body, headers, status, message):
    answer = mixed_webhook.session.post(
        mixed_webhook.url + "/mutate", data=body, headers=headers, timeout=5
    )
    assert answer.status_code == status
    assert answer.headers["Content-Type"] == "application/json"
    assert message in answer.json()["error"]
    assert "Traceback" not in answer.text


def test_an_admission_beneath_flask_is_answered_as_flask_answers_it(fresh_webhook):
    """The API server's requests take MutateFastPath; any other media type
    spelling goes through flask's route. Same review, same answer, both counted."""
    sent = json.dumps(review(pod(), dry_run=True)).encode()
    answers = [
        fresh_webhook.session.post(
            fresh_webhook.url + "/mutate", data=sent, headers={"Content-Type": media}, timeout=5
        )
        for media in ("application/json", "application/json; charset=utf-8")
    ]
    fast, routed = answers
    assert fast.status_code == routed.status_code == 200
    assert fast.content == routed.content and "patch" in fast.json()["response"]
    for answer in answers:
        assert answer.headers["Content-Type"] == "application/json"
        assert answer.headers["Content-Length"] == str(len(answer.content))
    metrics = fresh_webhook.session.get(fresh_webhook.url + "/metrics").text
    assert 'nettraffic_http_requests_total{path="/mutate",code="200"} 2' in metrics
    assert 'nettraffic_admission_reviews_total{outcome="mutated"} 2' in metrics
    # A bad body on the fast path is answered by flask's route, and counted once.
    bad = fresh_webhook.session.post(
        fresh_webhook.url + "/mutate", data=b"{", headers={"Content-Type": "application/json"}
    )
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
    metrics = fresh_webhook.session.get(fresh_webhook.url + "/metrics").text
    assert 'nettraffic_http_requests_total{path="/mutate",code="400"} 1' in metrics
    assert "nettraffic_admission_duration_seconds_count 2" in metrics


def test_body_over_the_limit_is_413(mixed_webhook):
    big = review(pod(annotations={"big": "x" * (7 * 2**20)}))
    answer = mixed_webhook.post("/mutate", big)
    assert answer.status_code == 413 and "server.maxRequestBytes" in answer.json()["error"]
    # An UPDATE with two ~3 MiB objects fits.
    large = pod(annotations={"big": "x" * (3 * 2**20 - 4096)})
    answer = mixed_webhook.post("/mutate", review(large, operation="UPDATE", old=large))
    assert answer.status_code == 200


def test_health_scores_and_metrics(fresh_webhook):
    get = fresh_webhook.session.get
    assert get(fresh_webhook.url + "/healthz").json() == {"status": "ok"}
    ready = get(fresh_webhook.url + "/readyz").json()
    assert ready["ready"] is True and ready["certificate"]["inSync"] is True
    scores = get(fresh_webhook.url + "/scores").json()
    assert set(scores) == {"generatedAt", "source", "window", "stale", "nodes"}
    assert scores["window"] == "10s" and scores["source"] == "prometheus"
    row = scores["nodes"][0]
    assert set(row) == {
        "name",
        "receiveBytesPerSecond",
        "transmitBytesPerSecond",
        "trafficBytesPerSecond",
        "linkUtilization",
        "linkSpeedBytesPerSecond",
        "cpuUsageRatio",
        "memoryUsageRatio",
        "inflightPods",
        "inflightBytesPerSecond",
        "tier",
        "score",
        "eligible",
        "reason",
    }
    t1 = next(n for n in scores["nodes"] if n["name"] == "t1")
    assert t1["eligible"] is False and "tainted dedicated=gpu:NoSchedule" in t1["reason"]
    # The exporters of nodes this webhook does not know are reported, not dropped.
    diagnostics = get(fresh_webhook.url + "/scores?diagnostics=1").json()["diagnostics"]
    assert any("nodename gpu-free" in series for series in diagnostics["unmappedSeries"])
    assert diagnostics["nodesWithoutSeries"] == [] and diagnostics["errors"] == []
    _admit(fresh_webhook, pod())
    _admit(fresh_webhook, pod(), operation="DELETE")
    assert get(fresh_webhook.url + "/no/such/path").status_code == 404
    assert get(fresh_webhook.url + "/mutate").status_code == 405
    assert fresh_webhook.session.options(fresh_webhook.url + "/mutate").status_code == 405
    assert fresh_webhook.post("/mutate", {"kind": "nonsense"}).status_code == 400
    metrics = get(fresh_webhook.url + "/metrics").text
    # Every answer is counted by route and code; unknown paths share one label.
    # (/mutate's are counted by the app itself: its admissions and its errors.)
    for path, code, count in (
        ("/healthz", 200, 1),
        ("/scores", 200, 2),
        ("/mutate", 200, 2),
        ("/mutate", 400, 1),
        ("/mutate", 405, 2),
        ("other", 404, 1),
    ):
        assert f'nettraffic_http_requests_total{{path="{path}",code="{code}"}} {count}' in metrics
    # Bounds as client_python writes them (Go floats), which Prometheus matches
    # against other exporters' le labels as strings.
    for bound in ("0.005", "0.025", "0.1", "0.5", "1.0", "2.5", "10.0", "25.0"):
        assert f'nettraffic_admission_duration_seconds_bucket{{le="{bound}"}}' in metrics
    assert "nettraffic_mutations_total 1" in metrics
    assert 'nettraffic_admission_reviews_total{outcome="ignored"} 1' in metrics
    assert "nettraffic_admission_duration_seconds_count 2" in metrics
    assert "nettraffic_snapshot_age_seconds " in metrics
    assert 'nettraffic_source_failures_total{source="prometheus"}' in metrics
    assert "nettraffic_snapshot_follow_failures_total 0" in metrics
    assert "nettraffic_connections_closed_total" in metrics
    # The worker's own process, as every Prometheus client exports it.
    resident = re.search(r"^process_resident_memory_bytes (\S+)$", metrics, re.M)
    assert resident is not None and float(resident[1]) > 10 * 2**20
    started = re.search(r"^process_start_time_seconds (\S+)$", metrics, re.M)
    assert started is not None and time.time() - 600 < float(started[1]) <= time.time()


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not on PATH")
def test_prometheus_own_parser_accepts_the_metrics(fresh_webhook):
    # A histogram with an observation in it, skips and errors with labels.
    _admit(fresh_webhook, pod())
    fresh_webhook.post("/mutate", {"kind": "nonsense"})
    metrics = fresh_webhook.session.get(fresh_webhook.url + "/metrics").text
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=metrics, capture_output=True, text=True
    )
    # Exit 0: parsed, no lint problems (exit 3 lists lint problems; 1 a parse error).
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_tls_is_at_least_1_2(mixed_webhook):
    context = ssl.create_default_context(cafile=mixed_webhook.ca_file)
    with warnings.catch_warnings():  # the old versions are deprecated: that is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    with (
        pytest.raises(ssl.SSLError),
        socket.create_connection(("127.0.0.1", mixed_webhook.port), timeout=5) as raw,
    ):
        context.wrap_socket(raw, server_hostname="localhost")
    good = ssl.create_default_context(cafile=mixed_webhook.ca_file)
    with (
        socket.create_connection(("127.0.0.1", mixed_webhook.port), timeout=5) as raw,
        good.wrap_socket(raw, server_hostname="nettraffic.nettraffic.svc") as tls,
    ):
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_renewed_cert_on_disk_is_served_without_restart(fresh_webhook):
    mixed_webhook = fresh_webhook

    def served_serial() -> str:
        with socket.create_connection(("127.0.0.1", mixed_webhook.port), timeout=5) as raw:
            context = ssl.create_default_context(cafile=mixed_webhook.ca_file)
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.getpeercert()["serialNumber"]

    before = served_serial()
    with (
        open(os.path.join(mixed_webhook.cert_dir, "ca.crt"), "rb") as ca,
        open(os.path.join(mixed_webhook.cert_dir, "ca.key"), "rb") as key,
    ):
        renewed = Issuance("nettraffic", "nettraffic", extra_sans=("localhost", "127.0.0.1")).new(
            ca=(ca.read(), key.read())
        )
    write_files(renewed, mixed_webhook.cert_dir)
    after = wait_for(lambda: (s := served_serial()) != before and s)
    assert after != before
    assert mixed_webhook.process.poll() is None  # same process
    assert mixed_webhook.session.get(mixed_webhook.url + "/readyz").json()["certificate"]["inSync"]


def test_a_dead_prometheus_never_slows_admission(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepts connections, never answers
    path = _node_file(tmp_path, "n.json", [node("a")])
    config = _config(f"http://127.0.0.1:{listener.getsockname()[1]}", path)
    config["prometheus"]["timeout"] = "10s"
    webhook = WebhookProcess(config, wait_ready=False)
    try:
        timings = []
        for _ in range(20):
            started = time.perf_counter()
            _, patched, _response = _admit(webhook, pod())
            timings.append(time.perf_counter() - started)
            assert patched["metadata"]["annotations"]["nettraffic.io/skipped"] == "no-snapshot"
        assert max(timings) < 0.5, timings
        assert (
            requests.get(webhook.url + "/readyz", verify=webhook.ca_file, timeout=5).status_code
            == 503
        )
    finally:
        webhook.stop()
        listener.close()


def test_helm_test_selftest_passes_against_the_running_webhook(mixed_webhook):
    import subprocess
    import sys

    def selftest(ca_file: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "webhook.selftest",
                "--url",
                f"https://localhost:{mixed_webhook.port}",
                "--ca-file",
                ca_file,
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )

    result = selftest(mixed_webhook.ca_file)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: ready=True patched=True")
    wrong_ca = selftest("/etc/ssl/certs/ca-certificates.crt")  # does not hold our CA
    assert wrong_ca.returncode == 1 and "FAIL" in wrong_ca.stderr
