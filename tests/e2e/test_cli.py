"""The plugin through a real kubectl binary, against the fake API server over
HTTP, whose service proxy forwards to a real running webhook."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from harness.fakeapi import FakeKubeAPI, node, node_metrics
from harness.reviews import pod
from harness.webhook import WebhookProcess
from kubectl_nettraffic.kube.pods import PREFERRED
from tests.e2e.conftest import MIXED_RATES, node_file, webhook_config

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl not on PATH (run through .ci/test)"
)


def _cluster_nodes() -> list[dict]:
    # Traffic tiers as the webhook's leader would have labelled them.
    nodes = [
        node(
            n,
            labels={
                "tier": "fast" if n == "q3" else "std",
                "nettraffic.io/traffic-tier": str(1 + i * 4 // len(MIXED_RATES)),
            },
        )
        for i, n in enumerate(MIXED_RATES)
    ]
    nodes.append(node("t1", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    return nodes


@pytest.fixture(scope="module")
def webhook(prometheus, tmp_path_factory):
    path = node_file(tmp_path_factory.mktemp("cli"), "nodes.json", _cluster_nodes())
    process = WebhookProcess(webhook_config(prometheus.url, path))
    yield process
    process.stop()


@pytest.fixture
def cluster(webhook, tmp_path):
    api = FakeKubeAPI()
    for obj in _cluster_nodes():
        api.put(obj)
    for name in MIXED_RATES:
        api.put(node_metrics(name, "1", "4Gi"), plural="nodes")
    api.proxy_targets[("nettraffic", "nettraffic")] = webhook.url
    api.proxy_verify = webhook.ca_file
    api.kubeconfig_path = api.kubeconfig(str(tmp_path / "kubeconfig"))
    yield api
    api.stop()


def kubectl(
    cluster: FakeKubeAPI, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": cluster.kubeconfig_path, "NO_COLOR": "1"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]  # kubectl-nettraffic
    return subprocess.run(
        [KUBECTL, "nettraffic", *args], capture_output=True, text=True, env=env, timeout=timeout
    )


def test_kubectl_finds_the_plugin(cluster):
    result = kubectl(cluster, "version")
    assert result.returncode == 0 and result.stdout.startswith("kubectl-nettraffic ")


def test_top_from_the_webhook_through_the_service_proxy(cluster):
    result = kubectl(cluster, "top", "--source", "webhook", "-o", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert [n["name"] for n in document["nodes"]] == ["q1", "q2", "q3", "t1"]
    assert any(
        r.path == "/api/v1/namespaces/nettraffic/services/https:nettraffic:443/proxy/scores"
        for r in cluster.requests
    )
    table = kubectl(cluster, "top", "--source", "webhook")
    lines = table.stdout.splitlines()
    assert lines[0].split()[:4] == ["NAME", "RX/s", "TX/s", "TRAFFIC"]
    assert lines[1].startswith("q1") and "tainted dedicated=gpu:NoSchedule" in lines[-1]
    assert "\x1b[" not in table.stdout  # not a terminal: no colours


def test_top_computed_locally_matches_the_webhook(cluster, prometheus, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"prometheus": {"url": prometheus.url, "window": "10s"}}))
    local = kubectl(cluster, "top", "--source", "prometheus", "--config", str(config), "-o", "json")
    assert local.returncode == 0, local.stderr
    remote = json.loads(kubectl(cluster, "top", "--source", "webhook", "-o", "json").stdout)
    local_doc = json.loads(local.stdout)
    assert [n["name"] for n in local_doc["nodes"]] == [n["name"] for n in remote["nodes"]]
    cpu = {n["name"]: n["cpuUsageRatio"] for n in local_doc["nodes"]}
    assert cpu["q1"] == pytest.approx(
        0.25
    )  # metrics-server usage / allocatable, as an extra column


def test_selector_node_names_sorting_and_headers(cluster):
    result = kubectl(
        cluster, "top", "--source", "webhook", "-l", "tier=std", "--sort-by", "name", "--no-headers"
    )
    assert [line.split()[0] for line in result.stdout.splitlines()] == [
        "q1",
        "q2",
    ]  # t1 has no tier label
    result = kubectl(cluster, "top", "q3", "q1", "--source", "webhook", "-o", "yaml")
    assert [n["name"] for n in yaml.safe_load(result.stdout)["nodes"]] == ["q1", "q3"]
    result = kubectl(cluster, "top", "nope", "--source", "webhook")
    assert result.returncode == 1 and "error: node(s) nope not found" in result.stderr


def test_auto_falls_back_to_local_and_errors_are_one_line(cluster, tmp_path):
    cluster.proxy_targets.clear()  # the webhook Service has no endpoints
    # Webhook unreachable, Prometheus dead: the local engine falls back to metrics-server.
    result = kubectl(cluster, "top", "--prometheus-url", "http://127.0.0.1:9", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["source"] == "metrics-server"
    assert result.stderr.startswith(
        "warning: prometheus: Prometheus at http://127.0.0.1:9 is unreachable"
    )
    # Without metrics-server nothing is left: one line, exit 1, no traceback.
    config = tmp_path / "config.yaml"
    config.write_text("metricsServer: {enabled: false}\n")
    result = kubectl(
        cluster, "top", "--prometheus-url", "http://127.0.0.1:9", "--config", str(config)
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: prometheus: Prometheus at http://127.0.0.1:9 is unreachable (ConnectionError); "
        "check prometheus.url; or run kubectl nettraffic doctor"
    ]
    verbose = kubectl(cluster, "top", "--source", "webhook", "-v")
    assert verbose.returncode == 1 and "Traceback" in verbose.stderr


def test_kubeconfig_is_never_written(cluster):
    with open(cluster.kubeconfig_path, "rb") as handle:
        before = hashlib.sha256(handle.read()).hexdigest()
    kubectl(cluster, "top", "--source", "webhook")
    with open(cluster.kubeconfig_path, "rb") as handle:
        assert hashlib.sha256(handle.read()).hexdigest() == before


def test_kubeconfig_flag_context_and_merged_paths(cluster, tmp_path):
    other = FakeKubeAPI()
    try:
        second = other.kubeconfig(str(tmp_path / "second"), context="second")
        env_paths = f"{second}{os.pathsep}{cluster.kubeconfig_path}"
        env = {
            **os.environ,
            "KUBECONFIG": env_paths,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        }
        result = subprocess.run(
            [
                KUBECTL,
                "nettraffic",
                "top",
                "--source",
                "webhook",
                "--context",
                "fake",
                "-o",
                "json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert result.returncode == 0, (
            result.stderr
        )  # context "fake" comes from the second merged file
        result = subprocess.run(
            [KUBECTL, "nettraffic", "top", "--source", "webhook", "--kubeconfig", second],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        # The second cluster has no webhook behind its service proxy.
        assert result.returncode == 1 and "HTTP 503" in result.stderr, result.stderr
    finally:
        other.stop()


def test_explain_a_steered_pod(cluster, webhook):
    import base64

    import jsonpatch

    from harness.reviews import review

    original = pod(name="web-1")
    answer = webhook.post("/mutate", review(original, dry_run=True)).json()["response"]
    steered = jsonpatch.apply_patch(original, json.loads(base64.b64decode(answer["patch"])))
    steered["spec"]["nodeName"] = "q2"
    # As the webhook writes them where the workload's spread bars a zone.
    outside = {"key": "nettraffic.io/zone", "operator": "NotIn", "values": ["zone-x"]}
    # ... and where a node was booked past a point since the measurement.
    booked = {"key": "metadata.name", "operator": "NotIn", "values": ["q3"]}
    for term in steered["spec"]["affinity"]["nodeAffinity"][PREFERRED]:
        if "matchExpressions" in term["preference"]:
            term["preference"]["matchExpressions"].append(outside)
            term["preference"]["matchFields"] = [booked]
    cluster.put(steered, plural="pods")
    result = kubectl(cluster, "explain", "web-1", "-n", "default", "--source", "webhook")
    assert result.returncode == 0, result.stderr
    assert "Steered:    yes" in result.stdout
    assert "Landed on:  q2 (2nd preference)" in result.stdout
    q1_line = next(line for line in result.stdout.splitlines() if line.strip().startswith("q1"))
    # NODE, WEIGHT, SCORE THEN, SCORE NOW, TIER NOW
    assert q1_line.split()[0] == "q1" and q1_line.split()[1].isdigit()
    assert q1_line.split()[4] == "1"
    # Of unknown size (nothing learned): the tiers by rank.
    assert (
        "Tiers:      also prefers nodes by what their nettraffic.io/traffic-tier saves it"
        " (1 at 60; 2 at 40; 3 at 20)" in result.stdout
    )
    assert "outside zone zone-x, which its workload's spread keeps it out of" in result.stdout
    assert "and zone" not in result.stdout  # a NotIn is no zone the pod is pulled to
    assert "but not q3: booked since the measurement" in result.stdout


def test_explain_a_skipped_pod(cluster):
    daemon = pod(name="agent-x", owner_kind="DaemonSet", spec={"nodeName": "q1"})
    cluster.put(daemon, plural="pods")
    result = kubectl(cluster, "explain", "agent-x", "-n", "default", "--source", "webhook")
    assert "Steered:    no (node-name-set)" in result.stdout
    missing = kubectl(cluster, "explain", "ghost", "-n", "default")
    assert missing.returncode == 1 and "reading pod default/ghost: HTTP 404" in missing.stderr


def test_watch_in_a_terminal_redraws_and_exits_0_on_ctrl_c(cluster, tmp_path):
    tmux = shutil.which("tmux")
    if tmux is None:
        pytest.skip("tmux not installed (run through .ci/test)")
    session = f"nt{os.getpid()}"
    script = tmp_path / "watch.sh"
    script.write_text(
        f"export KUBECONFIG={cluster.kubeconfig_path} PATH={os.path.dirname(sys.executable)}:$PATH\n"
        f"{KUBECTL} nettraffic top --source webhook -w --interval 1\n"
        f"echo EXIT=$?\nsleep 30\n"
    )
    subprocess.run(
        [tmux, "new-session", "-d", "-s", session, "-x", "160", "-y", "30", f"bash {script}"],
        check=True,
    )
    try:

        def screen() -> str:
            return subprocess.run(
                [tmux, "capture-pane", "-p", "-t", session], capture_output=True, text=True
            ).stdout

        deadline = time.monotonic() + 30
        while "CHANGE" not in screen() or screen().count("Every 1s") != 1:
            assert time.monotonic() < deadline, screen()
            time.sleep(0.3)
        frame = screen()
        assert frame.count("NAME") == 1  # redrawn in place, not appended
        assert "q1" in frame and "█" in frame  # bars on a terminal
        subprocess.run([tmux, "send-keys", "-t", session, "C-c"], check=True)
        deadline = time.monotonic() + 10
        while "EXIT=" not in screen():
            assert time.monotonic() < deadline, screen()
            time.sleep(0.2)
        assert "EXIT=0" in screen()
    finally:
        subprocess.run([tmux, "kill-session", "-t", session], capture_output=True)


def test_watch_without_a_terminal_prints_successive_tables(cluster):
    env = {
        **os.environ,
        "KUBECONFIG": cluster.kubeconfig_path,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
    }
    process = subprocess.Popen(
        [KUBECTL, "nettraffic", "top", "--source", "webhook", "-w", "--interval", "0.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # As from a terminal: a runner that started the tests in the background
        # (`cmd &` without job control) left SIGINT ignored, and a child that
        # inherits that never sees Ctrl-C (Python keeps an ignored SIGINT ignored).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    out = ""
    deadline = time.monotonic() + 30
    while out.count("NAME") < 2:  # two tables, one after the other
        assert time.monotonic() < deadline, out
        out += process.stdout.readline()
    process.send_signal(signal.SIGINT)  # as Ctrl-C
    rest, _ = process.communicate(timeout=10)
    assert process.returncode == 0
    assert "\x1b[" not in out + rest
