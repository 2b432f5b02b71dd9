"""The peer testbed's services: one run's draw of servers and clients, and
the clients' byte counts as an Istio sidecar exports them
(``istio_tcp_sent_bytes_total`` / ``istio_tcp_received_bytes_total``,
``reporter="source"``)."""

import json
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass

from bench.testbed.cluster import PlacedPod

NAMESPACE = "default"


@dataclass(frozen=True)
class Services:
    """One run's draw: each server's pods, each client workload's server and pods."""

    servers: dict[str, int]
    clients: dict[str, tuple[str, int]]

    @staticmethod
    def draw(rng: random.Random) -> "Services":
        servers = {f"server-{i}": rng.randint(1, 2) for i in range(1, 4)}
        clients = {
            f"client-{i}": (rng.choice(sorted(servers)), rng.randint(2, 3)) for i in range(1, 5)
        }
        return Services(servers, clients)


def bytes_of(workdir: str, pod: str) -> dict[str, list[int]]:
    """A client pod's byte counts per server pod, as its conversation writes
    them: [to the server, from the server]; empty before its first write."""
    try:
        with open(os.path.join(workdir, pod + ".bytes.json")) as handle:
            return json.load(handle)  # type: ignore[no-any-return]
    except (FileNotFoundError, ValueError):
        return {}


def istio_series(clients: Iterable[PlacedPod], services: Services, workdir: str) -> str:
    """Each running client pod's sidecar counters, as Istio names them:
    received is what the client sent, sent what the server answered."""
    lines = [
        "# TYPE istio_tcp_sent_bytes_total counter",
        "# TYPE istio_tcp_received_bytes_total counter",
    ]
    for placed in clients:
        server = services.clients[placed.arrival.workload][0]
        sent = received = 0
        for to_server, from_server in bytes_of(workdir, placed.name).values():
            received, sent = received + to_server, sent + from_server
        labels = (
            f'reporter="source",source_workload="{placed.arrival.workload}",'
            f'source_workload_namespace="{NAMESPACE}",destination_workload="{server}",'
            f'destination_workload_namespace="{NAMESPACE}",request_protocol="tcp",'
            f'pod="{placed.name}"'
        )
        lines.append(f"istio_tcp_sent_bytes_total{{{labels}}} {sent}")
        lines.append(f"istio_tcp_received_bytes_total{{{labels}}} {received}")
    return "\n".join(lines) + "\n"
