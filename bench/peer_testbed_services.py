"""The peer testbed's services: one run's draw of servers and clients, the
clients' byte counts as an Istio sidecar exports them
(``istio_tcp_sent_bytes_total`` / ``istio_tcp_received_bytes_total``,
``reporter="source"``), and the servers' Services and endpoints."""

import json
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bench.testbed.cluster import PlacedPod
from bench.testbed.network import Network
from bench.testbed.zones import zone_of
from harness.fakeapi import FakeKubeAPI, endpoint_slice, service

NAMESPACE = "default"
SERVER_PORT = 8080


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

    def pods(self, kind: str) -> list[tuple[str, str]]:
        """A rollout's pods of ``kind`` ("server" or "client"), (workload, kind) each."""
        if kind == "server":
            replicas = self.servers
        else:
            replicas = {workload: count for workload, (_, count) in self.clients.items()}
        return [(workload, kind) for workload, count in replicas.items() for _ in range(count)]


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


class Endpoints:
    """Each server's Service and EndpointSlice in the API server, and each
    client's endpoint file (bench/testbed/conversation.py): the server pods
    kube-proxy would send it to, all of them, or with PreferSameZone those
    in its zone when there are any."""

    def __init__(
        self,
        api: FakeKubeAPI,
        network: Network,
        services: Services,
        prefer_same_zone: bool,
        workdir: str,
    ) -> None:
        self.api, self.network, self.services = api, network, services
        self.prefer_same_zone, self.workdir = prefer_same_zone, workdir
        distribution = "PreferSameZone" if prefer_same_zone else None
        for server in services.servers:
            api.put(service(server, distribution, namespace=NAMESPACE, port=SERVER_PORT))

    def _zone(self, pod: PlacedPod) -> str:
        return next(zone_of(n) for n in self.network.nodes if n.name == pod.node)

    def write(self, client: PlacedPod, servers: Sequence[PlacedPod]) -> None:
        """``client``'s endpoint file, of the running ``servers``; it
        reconnects when the file changes."""
        server = self.services.clients[client.arrival.workload][0]
        pods = [p for p in servers if p.arrival.workload == server]
        if self.prefer_same_zone:
            near = [p for p in pods if self._zone(p) == self._zone(client)]
            pods = near or pods
        path = os.path.join(self.workdir, client.name + ".endpoints")
        with open(path + ".tmp", "w") as handle:
            handle.writelines(f"{self._address(p)}\n" for p in pods)
        os.replace(path + ".tmp", path)

    def _address(self, pod: PlacedPod) -> str:
        return f"{self.network.pod_addresses[pod.namespace or '']}:{SERVER_PORT}"

    def publish(self, servers: Sequence[PlacedPod], clients: Iterable[PlacedPod]) -> None:
        """The running ``servers`` into every EndpointSlice and every client's file."""
        for client in clients:
            self.write(client, servers)
        addresses = {p.name: self.network.pod_addresses[p.namespace or ""] for p in servers}
        for server in self.services.servers:
            pods = [
                (p.name, p.node or "", self._zone(p))
                for p in servers
                if p.arrival.workload == server
            ]
            self.api.put(
                endpoint_slice(
                    server, pods, self.prefer_same_zone, namespace=NAMESPACE, addresses=addresses
                )
            )
