"""Running ``kubectl nettraffic`` through the real kubectl, against a fake
API server whose kubeconfig names the context's namespace."""

import os
import shutil
import subprocess
import sys

import yaml

from harness.fakeapi import FakeKubeAPI

KUBECTL = shutil.which("kubectl")


def kubeconfig_in_namespace(api: FakeKubeAPI, path: str, namespace: str) -> str:
    """A kubeconfig for ``api`` whose context's namespace is ``namespace``, as
    ``kubectl config set-context --current --namespace NAMESPACE`` leaves it."""
    kubeconfig = api.kubeconfig(path)
    with open(kubeconfig) as handle:
        document = yaml.safe_load(handle)
    document["contexts"][0]["context"]["namespace"] = namespace
    with open(kubeconfig, "w") as handle:
        yaml.safe_dump(document, handle)
    return kubeconfig


def kubectl_nettraffic(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``kubectl nettraffic ARGS``, finding this venv's kubectl-nettraffic on PATH."""
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig,
        "NO_COLOR": "1",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
    }
    return subprocess.run(
        [KUBECTL or "kubectl", "nettraffic", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
