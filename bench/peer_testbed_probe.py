"""The peer testbed's probe: a client and its server in one zone, on two
nodes, outside every placement. Its p99 is the round trip within a zone
while a placement's pods talk: what a client pod whose requests all stay
in its zone can expect on this machine at that moment, and the yardstick
that tells a busy machine from the distance between zones."""

import os
import sys

from bench.testbed.conversation import read_rtts
from bench.testbed.network import Network
from bench.testbed.stats import percentiles
from bench.testbed.workload import PodProcess, in_namespace
from bench.testbed.zones import ZONES, zone_of

PROBE_NAME = "probe-client"


class Probe:
    """Started at once; ``stop`` ends both processes (the network removes
    their namespaces when it closes)."""

    def __init__(
        self, network: Network, workdir: str, port: int, rate: float, response_bytes: int
    ) -> None:
        here, there = [node for node in network.nodes if zone_of(node) == ZONES[0]][:2]
        conversation = [sys.executable, "-m", "bench.testbed.conversation"]
        server_namespace = network.add_pod(there)
        log = os.path.join(workdir, "probe-server.log")
        argv = [*conversation, "server", str(port), str(response_bytes)]
        self.server = PodProcess(in_namespace(server_namespace, argv, log), log)
        self.out = os.path.join(workdir, PROBE_NAME)
        endpoint = f"{network.pod_addresses[server_namespace]}:{port}"
        argv = [*conversation, "client", self.out, f"{rate:g}", str(response_bytes), endpoint]
        client_namespace = network.add_pod(here)
        self.client = PodProcess(
            in_namespace(client_namespace, argv, self.out + ".log"), self.out + ".log"
        )

    def p99_ms(self, started: float, ended: float) -> float:
        """The probe's p99 round trip between two wall times, in ms; NaN
        when it measured nothing then."""
        rtts = [(at, rtt) for at, rtt in read_rtts(self.out + ".rtt") if started <= at <= ended]
        return percentiles(rtts, (0.99,))[0] * 1e3 if rtts else float("nan")

    def stop(self) -> None:
        self.client.stop()
        self.server.stop()
