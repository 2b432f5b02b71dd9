"""The image built from the Dockerfile (.ci/image), run as the chart runs it:
read-only root, uid 65532, every capability dropped, /tmp a tmpfs (the
chart's emptyDir). Host networking, so it reaches the test Prometheus and
the fake API server on 127.0.0.1."""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator

import pytest
import requests
import yaml

from harness.fakeapi import FakeKubeAPI, node, webhook_configuration
from harness.prometheus import free_port
from harness.reviews import pod, review
from harness.webhook import make_certs
from tests.e2e.conftest import MIXED_RATES
from tests.e2e.conftest import node_file as _node_file
from tests.e2e.conftest import webhook_config as _config

IMAGE = os.environ.get("NT_IMAGE", "")
pytestmark = pytest.mark.skipif(
    not IMAGE or shutil.which("podman") is None,
    reason="NT_IMAGE not set: run through .ci/test, which builds the image first (.ci/image)",
)

AS_THE_CHART_RUNS_IT = [
    "--read-only",
    "--user=65532:65532",
    "--cap-drop=ALL",
    "--security-opt=no-new-privileges",
    "--tmpfs=/tmp",
    "--network=host",
]


def podman(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)


def run(*args: str, entrypoint: str | None = None, mounts: dict[str, str] | None = None):
    options = [*AS_THE_CHART_RUNS_IT]
    if entrypoint:
        options.append(f"--entrypoint={entrypoint}")
    for source, target in (mounts or {}).items():
        options.append(f"--volume={source}:{target}:ro")
    return podman("run", "--rm", *options, IMAGE, *args)


@pytest.fixture
def shared_dir() -> Iterator[str]:
    """A directory the container's uid 65532 can read."""
    directory = tempfile.mkdtemp(prefix="nt-image-")
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def readable(directory: str) -> None:
    for root, dirs, files in os.walk(directory):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)


@pytest.mark.parametrize("command", ["nettraffic-webhook", "kubectl-nettraffic"])
def test_both_console_scripts_answer_help(command):
    result = run("--help", entrypoint=command)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage:")


def test_no_pip_or_setuptools_anywhere():
    script = (
        "find / -xdev \\( -name pip -o -name 'pip-*' -o -name setuptools -o -name 'setuptools-*'"
        " -o -name ensurepip -o -name python-wheels \\) -print 2>/dev/null;"
        " python -c 'import pip' 2>/dev/null && echo 'pip imports';"
        " python -c 'import setuptools' 2>/dev/null && echo 'setuptools imports'; true"
    )
    result = run("-c", script, entrypoint="sh")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_cert_hooks_against_the_fake_api_over_tls(shared_dir):
    tls = make_certs(os.path.join(shared_dir, "api"))
    api = FakeKubeAPI(tls=(os.path.join(tls, "tls.crt"), os.path.join(tls, "tls.key")))
    try:
        api.kubeconfig(os.path.join(shared_dir, "kubeconfig"), ca_file="/kube/api/ca.crt")
        api.put(webhook_configuration())
        readable(shared_dir)
        kube = ["--kubeconfig", "/kube/kubeconfig"]
        mounts = {shared_dir: "/kube"}
        create = run(
            "certs", "create", "--namespace", "nettraffic", "--service", "nettraffic",
            "--secret", "nettraffic-tls", *kube, entrypoint="kubectl-nettraffic", mounts=mounts,
        )  # fmt: skip
        assert create.returncode == 0, create.stderr
        patch = run(
            "certs", "patch", "--namespace", "nettraffic", "--secret", "nettraffic-tls",
            "--webhook-name", "nettraffic", *kube, entrypoint="kubectl-nettraffic", mounts=mounts,
        )  # fmt: skip
        assert patch.returncode == 0, patch.stderr
        secret = api.get(("api/v1", "nettraffic", "secrets"), "nettraffic-tls")
        configuration = api.get(
            ("apis/admissionregistration.k8s.io/v1", None, "mutatingwebhookconfigurations"),
            "nettraffic",
        )
        bundle = {w["clientConfig"]["caBundle"] for w in configuration["webhooks"]}
        assert bundle == {secret["data"]["ca.crt"]}
    finally:
        api.stop()


def test_the_webhook_serves_as_the_chart_runs_it(prometheus, shared_dir):
    certs = make_certs(os.path.join(shared_dir, "issued"))
    # What the chart mounts: the serving pair only.
    os.makedirs(os.path.join(shared_dir, "tls"))
    for name in ("tls.crt", "tls.key"):
        shutil.copy(os.path.join(certs, name), os.path.join(shared_dir, "tls", name))
    _node_file(shared_dir, "nodes.json", [node(n) for n in MIXED_RATES])
    port = free_port()
    config = _config(prometheus.url, "/etc/nettraffic/shared/nodes.json")
    config["server"] = {"address": "127.0.0.1", "port": port}
    with open(os.path.join(shared_dir, "config.yaml"), "w") as handle:
        yaml.safe_dump(config, handle)
    readable(shared_dir)
    name = f"nt-webhook-{uuid.uuid4().hex[:8]}"
    started = podman(
        "run", "--detach", f"--name={name}", *AS_THE_CHART_RUNS_IT,
        f"--volume={shared_dir}/tls:/etc/nettraffic/tls:ro",
        f"--volume={shared_dir}:/etc/nettraffic/shared:ro",
        IMAGE, "--config", "/etc/nettraffic/shared/config.yaml",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    url = f"https://127.0.0.1:{port}"
    session = requests.Session()
    session.verify, session.trust_env = os.path.join(certs, "ca.crt"), False
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if session.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, podman("logs", name).stderr[-3000:]
            time.sleep(0.3)
        assert session.get(url + "/healthz", timeout=5).json() == {"status": "ok"}
        answer = session.post(url + "/mutate", json=review(pod()), timeout=10).json()
        patch = json.loads(base64.b64decode(answer["response"]["patch"]))
        assert any(op["path"] == "/spec/affinity" for op in patch)
        selftest = run(
            "-m", "webhook.selftest", "--url", f"https://localhost:{port}",
            "--ca-file", "/ca/ca.crt", entrypoint="python", mounts={certs: "/ca"},
        )  # fmt: skip
        assert selftest.returncode == 0, selftest.stdout + selftest.stderr
    finally:
        session.close()
        podman("rm", "--force", "--time=2", name)
