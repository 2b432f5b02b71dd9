"""The real webhook: ``nettraffic-webhook`` (gunicorn, TLS) as a subprocess on
127.0.0.1, with certs from our own cert tooling."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import requests
import yaml

from harness import stop_process
from harness.prometheus import free_port
from kubectl_nettraffic.tls.certs import Issuance, create_in_directory


def make_certs(directory: str) -> str:
    """CA + serving cert valid for localhost / 127.0.0.1, via our tooling."""
    create_in_directory(
        directory, Issuance("nettraffic", "nettraffic", extra_sans=("localhost", "127.0.0.1"))
    )
    return directory


class WebhookProcess:
    def __init__(
        self, config: dict[str, Any], cert_dir: str | None = None, wait_ready: bool = True
    ) -> None:
        self.workdir = tempfile.mkdtemp(prefix="nt-webhook-")
        self.cert_dir = cert_dir or make_certs(os.path.join(self.workdir, "tls"))
        self.ca_file = os.path.join(self.cert_dir, "ca.crt")
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        config = dict(config)
        config["server"] = {
            "address": "127.0.0.1",
            "port": self.port,
            "certFile": os.path.join(self.cert_dir, "tls.crt"),
            "keyFile": os.path.join(self.cert_dir, "tls.key"),
            **config.get("server", {}),
        }
        self.config_path = os.path.join(self.workdir, "config.yaml")
        with open(self.config_path, "w") as handle:
            yaml.safe_dump(config, handle)
        self.log_path = os.path.join(self.workdir, "webhook.log")
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "webhook.server", "--config", self.config_path],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self.session = requests.Session()
        self.session.verify = self.ca_file
        # REQUESTS_CA_BUNDLE in the environment would override session.verify.
        self.session.trust_env = False
        self._wait(ready=wait_ready)

    def _wait(self, ready: bool, timeout: float = 30.0) -> None:
        path = "/readyz" if ready else "/healthz"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"webhook exited:\n{self.log()}")
            try:
                if self.session.get(self.url + path, timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        log = self.log()
        self.stop()
        raise RuntimeError(f"webhook not {path} within {timeout}s:\n{log}")

    def log(self) -> str:
        with open(self.log_path) as handle:
            return handle.read()[-4000:]

    def post(self, path: str, body: Any, **kwargs: Any) -> requests.Response:
        return self.session.post(self.url + path, json=body, timeout=10, **kwargs)

    def stop(self) -> None:
        stop_process(self.process)
        self._log.close()
        self.session.close()
        shutil.rmtree(self.workdir, ignore_errors=True)
