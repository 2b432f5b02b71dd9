"""Cert rotation against the running gunicorn server with a client looping
real handshakes through the switch; and `doctor` over a whole working setup."""

import base64
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time

import pytest
import requests

from harness.fakeapi import FakeKubeAPI, node, node_metrics, webhook_configuration
from harness.webhook import WebhookProcess
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.tls.cert_files import write_files
from kubectl_nettraffic.tls.cert_secret import read_secret
from kubectl_nettraffic.tls.certs import (
    Issuance,
    create_in_cluster,
    patch_in_cluster,
    rotate_in_cluster,
)
from tests.conftest import wait_for
from tests.e2e.conftest import EQUAL, MIXED_RATES, node_file, webhook_config

SPEC = Issuance("nettraffic", "nettraffic", extra_sans=("127.0.0.1", "localhost"))
SHORT_CA = Issuance(
    "nettraffic", "nettraffic", ca_days=300, days=200, extra_sans=("127.0.0.1", "localhost")
)
SERVICE_NAME = "nettraffic.nettraffic.svc"


def _configuration(api: FakeKubeAPI) -> None:
    api.put(webhook_configuration())


class KubeletSync:
    """Copies the Secret to the mounted directory after a delay, as the kubelet does."""

    def __init__(self, api: FakeKubeAPI, client, directory: str, delay: float) -> None:
        self.api, self.client, self.directory, self.delay = api, client, directory, delay
        self.stop = threading.Event()
        self.version = ""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.sync()
        self.thread.start()

    def sync(self) -> None:
        stored = read_secret(self.client, "nettraffic", "nettraffic-tls")
        if stored and stored.resource_version != self.version:
            if self.version:
                time.sleep(self.delay)
            write_files(stored.bundle, self.directory)
            self.version = stored.resource_version

    def _run(self) -> None:
        while not self.stop.wait(0.1):
            self.sync()


def _ca_bundle(api: FakeKubeAPI) -> str:
    configuration = api.get(
        ("apis/admissionregistration.k8s.io/v1", None, "mutatingwebhookconfigurations"),
        "nettraffic",
    )
    return base64.b64decode(configuration["webhooks"][0]["clientConfig"]["caBundle"]).decode()


def test_rotation_with_zero_failed_handshakes(tmp_path, prometheus):
    api = FakeKubeAPI()
    client = api_client(api.kubeconfig(str(tmp_path / "kubeconfig")))
    create_in_cluster(client, "nettraffic-tls", SHORT_CA)  # CA due: rotation makes a new one
    _configuration(api)
    patch_in_cluster(client, "nettraffic-tls", "nettraffic", "nettraffic", None)
    cert_dir = str(tmp_path / "mounted")
    kubelet = KubeletSync(api, client, cert_dir, delay=0.5)
    webhook = WebhookProcess(
        webhook_config(prometheus.url, node_file(tmp_path, "n.json", [node("q1")])),
        cert_dir=cert_dir,
        wait_ready=False,
    )
    results: list[tuple[bool, str]] = []
    stop = threading.Event()

    def handshakes() -> None:
        # Like the API server: trust exactly the caBundle of the configuration, now.
        for _ in range(5000):
            if stop.is_set():
                return
            try:
                context = ssl.create_default_context(cadata=_ca_bundle(api))
                with (
                    socket.create_connection(("127.0.0.1", webhook.port), timeout=5) as raw,
                    context.wrap_socket(raw, server_hostname=SERVICE_NAME) as tls,
                ):
                    results.append((True, tls.getpeercert()["serialNumber"]))
            except (ssl.SSLError, OSError) as error:
                results.append((False, str(error)))

    loop = threading.Thread(target=handshakes)
    try:
        loop.start()
        wait_for(lambda: len(results) >= 10)  # handshakes with the first certificate
        message = rotate_in_cluster(client, "nettraffic-tls", "nettraffic", SPEC, force=True)
        assert "new CA" in message
        # The kubelet's delay, then the reload on the next connection.
        first = results[0][1]
        wait_for(lambda: any(ok and serial != first for ok, serial in results[-5:]), timeout=15)
        stop.set()
        loop.join(30)
        failures = [detail for ok, detail in results if not ok]
        serials = [detail for ok, detail in results if ok]
        assert not failures, failures[:3]
        assert len(results) > 50 and len(set(serials)) == 2  # old cert, then the new one
        assert serials[-1] != serials[0]
        assert webhook.session.get(webhook.url + "/readyz").json()["certificate"]["inSync"]
    finally:
        stop.set()
        kubelet.stop.set()
        webhook.stop()
        api.stop()


@pytest.fixture
def working_setup(tmp_path, prometheus):
    api = FakeKubeAPI()
    kubeconfig = api.kubeconfig(str(tmp_path / "kubeconfig"))
    client = api_client(kubeconfig)
    names = [*EQUAL, *MIXED_RATES, "t1", "gpu-free"]
    for name in names:
        api.put(node(name))
        api.put(node_metrics(name, "500m", "1Gi"), plural="nodes")
    create_in_cluster(client, "nettraffic-tls", SPEC)
    _configuration(api)
    patch_in_cluster(client, "nettraffic-tls", "nettraffic", "nettraffic", None)
    cert_dir = str(tmp_path / "mounted")
    write_files(read_secret(client, "nettraffic", "nettraffic-tls").bundle, cert_dir)
    webhook = WebhookProcess(
        webhook_config(prometheus.url, node_file(tmp_path, "n.json", [node(n) for n in names])),
        cert_dir=cert_dir,
    )
    api.proxy_targets[("nettraffic", "nettraffic")] = webhook.url
    api.proxy_verify = webhook.ca_file
    api.put(
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "nettraffic-abc",
                "namespace": "nettraffic",
                "labels": {"kubernetes.io/service-name": "nettraffic"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.9.0.7"], "conditions": {"ready": True}}],
            "ports": [{"port": 8443}],
        },
        plural="endpointslices",
    )
    config = tmp_path / "config.yaml"
    # No kube-state-metrics or cAdvisor series in this Prometheus: learning off.
    config.write_text(
        f"prometheus: {{url: '{prometheus.url}', window: 10s}}\nlearning: {{enabled: false}}\n"
    )
    yield api, kubeconfig, str(config)
    webhook.stop()
    api.stop()


def _doctor(kubeconfig: str, config: str) -> subprocess.CompletedProcess[str]:
    kubectl = shutil.which("kubectl")
    command = (
        [kubectl, "nettraffic"]
        if kubectl
        else [sys.executable, "-m", "kubectl_nettraffic.cli.main"]
    )
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
    }
    return subprocess.run(
        [*command, "doctor", "--config", config],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_doctor_passes_on_a_working_setup(working_setup):
    _, kubeconfig, config = working_setup
    result = _doctor(kubeconfig, config)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (
        "API server reachable",
        "webhook Service has ready endpoints",
        "MutatingWebhookConfiguration present",
        "webhook ready with fresh scores",
        "webhook's pairs between workloads still pull",
        "caBundle verifies the served cert",
        "Prometheus reachable",
        "node_exporter series found",
        "every node mapped to its series",
        "flow metrics between workloads (peers)",
        "metrics.k8s.io available",
    ):
        assert f"PASS  {name}" in result.stdout, result.stdout
    assert "peers.source: none" in result.stdout  # says why no conversations are counted
    assert "11 passed, 0 failed" in result.stdout


def test_doctor_names_each_failure_and_its_fix(working_setup):
    api, kubeconfig, config = working_setup
    api.delete(("apis/discovery.k8s.io/v1", "nettraffic", "endpointslices"), "nettraffic-abc")
    api.delete(("api/v1", None, "nodes"), "gpu-free")
    api.forbidden.add(("GET", "/apis/metrics.k8s.io"))
    configuration = api.get(
        ("apis/admissionregistration.k8s.io/v1", None, "mutatingwebhookconfigurations"),
        "nettraffic",
    )
    other = Issuance("nettraffic", "nettraffic").new()
    configuration["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(
        other.ca_cert
    ).decode()
    api.put(configuration)
    result = _doctor(kubeconfig, config)
    assert result.returncode == 1
    out = result.stdout
    assert (
        "FAIL  webhook Service has ready endpoints" in out
        and "fix: kubectl -n nettraffic get pods" in out
    )
    assert (
        "FAIL  caBundle verifies the served cert" in out
        and "fix: kubectl nettraffic certs patch" in out
    )
    assert "FAIL  every node mapped to its series" in out and "gpu-free" in out
    assert "FAIL  metrics.k8s.io available" in out and "fix: install metrics-server" in out
    assert "PASS  Prometheus reachable" in out


def test_hot_reload_keeps_the_old_cert_when_the_new_pair_is_broken(tmp_path, prometheus):
    cert_dir = str(tmp_path / "tls")
    write_files(SPEC.new(), cert_dir)
    webhook = WebhookProcess(
        webhook_config(prometheus.url, node_file(tmp_path, "n.json", [node("q1")])),
        cert_dir=cert_dir,
    )
    try:
        before = webhook.session.get(webhook.url + "/readyz").json()["certificate"]["served"]
        with open(os.path.join(cert_dir, "tls.key"), "wb") as handle:
            handle.write(SPEC.new().key)  # a key that does not match tls.crt
        for _ in range(3):
            answer = requests.get(webhook.url + "/readyz", verify=webhook.ca_file, timeout=5)
            assert answer.status_code == 200
        assert answer.json()["certificate"]["served"] == before
        assert "keeping the previous serving cert" in webhook.log()
    finally:
        webhook.stop()


def test_doctor_says_what_learning_lacks_and_how_to_get_it(working_setup, tmp_path):
    _, kubeconfig, config = working_setup
    learning = tmp_path / "learning.yaml"
    with open(config) as handle:
        learning.write_text(handle.read().replace("enabled: false", "enabled: true"))
    result = _doctor(kubeconfig, str(learning))
    assert result.returncode == 1
    line = next(
        text
        for text in result.stdout.splitlines()
        if "per-pod traffic for bandwidth learning" in text
    )
    assert line.startswith("FAIL")
    assert "no cAdvisor pod network and no kube-state-metrics series" in result.stdout
    assert "/metrics/cadvisor" in result.stdout and "install kube-state-metrics" in result.stdout
