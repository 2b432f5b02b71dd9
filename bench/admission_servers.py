"""What bench.admission runs beside the webhook: a bench server module in
a process of its own (the bare apps), and two other replicas' steered pods
arriving through the fake API server, one of them holding the tier
labels' Lease."""

import subprocess
import sys
import threading
import time

from harness.fakeapi import FakeKubeAPI
from harness.prometheus import free_port
from harness.reviews import pod
from kubectl_nettraffic.config import TierLabelSettings
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.lease import LeaseElection
from kubectl_nettraffic.kube.pods import (
    BANDWIDTH_SOURCE,
    BOOKED_BANDWIDTH,
    BOOKING,
    PREFERRED_NODES,
    STEERED_BY,
)
from kubectl_nettraffic.measuring.tier_labels import lease_namespace


class ServerProcess:
    """A server module of bench/ (``python -m MODULE --config FILE --port N``) on 127.0.0.1."""

    def __init__(
        self, config_path: str, module: str = "bench.bare_app", extra: tuple[str, ...] = ()
    ) -> None:
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                module,
                "--config",
                config_path,
                "--port",
                str(self.port),
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import requests

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                requests.get(self.url + "/healthz", verify=False, timeout=1)
                return
            except requests.RequestException:
                time.sleep(0.1)
        raise RuntimeError(f"{module} did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


class OtherReplicas:
    """Two other replicas' steered pods, created in the fake API server a
    few every second (bound at once to their first preference), as the
    replica under test sees them through its binding watch. With ``leading``
    one of them holds the tier labels' Lease, taken before the replica under
    test starts: the product's LeaseElection, as that replica would run it."""

    def __init__(
        self,
        api: FakeKubeAPI,
        names: list[str],
        kubeconfig: str,
        leading: bool,
        per_second: float = 4.0,
    ) -> None:
        self.api, self.names, self.interval = api, names, 1 / per_second
        self.election: LeaseElection | None = None
        if leading:
            labels = TierLabelSettings()
            self.election = LeaseElection(
                api_client(kubeconfig),
                lease_namespace(labels.lease_namespace),  # the webhook's, from the same env
                labels.lease_name,
                "replica-a",
            )
            if not self.election.try_acquire_or_renew():
                raise RuntimeError("the other replica could not take the tier labels' Lease")
            self.election.start()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        index = 0
        while not self._stop.wait(self.interval):
            index += 1
            node = self.names[index * 7919 % len(self.names)]
            created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            steered = pod(name=f"other-{index}")
            steered["metadata"]["creationTimestamp"] = created
            steered["metadata"]["labels"][STEERED_BY] = ("replica-a", "replica-c")[index % 2]
            steered["metadata"]["annotations"] = {
                BOOKING: str(index),
                BOOKED_BANDWIDTH: str(2**20),
                BANDWIDTH_SOURCE: "default",
                PREFERRED_NODES: node,
            }
            steered["spec"]["nodeName"] = node
            self.api.put(steered)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.election is not None:
            self.election.stop()
