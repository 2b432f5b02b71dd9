"""Zones on the testbed's network: which zone a node is in, and the
distance between zones.

A node routes the pod subnets of the other zones into a tun device whose
reader (zone_delay.c, compiled here with gcc) hands each packet back
``delay_ms`` later; a policy rule sends what comes back out of the tun over
the node's link. So a packet from a pod to a pod in another zone waits
``delay_ms`` once, on its way out of its node, and a round trip between
zones is 2 x ``delay_ms`` longer. The testbed's kernel has no netem (no
modules to load, tc knows htb, pfifo, bfifo and clsact only): this is
netem's ``delay`` alone, without jitter or loss.
"""

import os
from collections.abc import Sequence

from bench.testbed.compiled import compiled
from bench.testbed.network import Network, TestbedNode, run
from bench.testbed.workload import PodProcess, in_namespace

ZONES = ("zone-a", "zone-b", "zone-c")
DELAY_TABLE = "100"  # the routing table of what comes back out of the tun


def zone_of(node: TestbedNode) -> str:
    """Nodes take the zones in turn: node 1 zone-a, node 2 zone-b, ..."""
    return ZONES[(node.index - 1) % len(ZONES)]


def why_no_zones() -> str | None:
    """None when zones can be built here (on a testbed: run.why_unavailable
    checks gcc), else what is missing."""
    if not os.path.exists("/dev/net/tun"):
        return "/dev/net/tun is missing: the zones' delay reads a tun device"
    return None


def delay_between_zones(network: Network, delay_ms: float, workdir: str) -> list[PodProcess]:
    """Every node's packets to another zone's pods wait ``delay_ms``; the
    delaying processes, which the caller stops (the namespaces take the tun
    devices and routes with them)."""
    binary = compiled("zone_delay.c", workdir)
    processes = []
    for node in network.nodes:
        tun = f"tunlz{node.index}"  # tunl.*: left out of node traffic by default
        namespace = node.namespace
        run("ip", "tuntap", "add", "dev", tun, "mode", "tun", namespace=namespace)
        run("ip", "link", "set", tun, "up", namespace=namespace)
        # The packets come back in on the tun from addresses routed elsewhere.
        for key in ("all", "default", tun):
            run("sysctl", "-qw", f"net.ipv4.conf.{key}.rp_filter=0", namespace=namespace)
        for other in _other_zones(network.nodes, node):
            subnet = f"{other.pod_subnet}.0/24"
            run("ip", "route", "replace", subnet, "dev", tun, namespace=namespace)
            run("ip", "route", "add", subnet, "via", other.address, "table", DELAY_TABLE,
                namespace=namespace)  # fmt: skip
        run("ip", "rule", "add", "iif", tun, "lookup", DELAY_TABLE, "pref", DELAY_TABLE,
            namespace=namespace)  # fmt: skip
        log = os.path.join(workdir, f"zone-delay-{node.index}.log")
        argv = [binary, tun, str(round(delay_ms * 1000))]
        processes.append(PodProcess(in_namespace(namespace, argv, log), log))
    return processes


def _other_zones(nodes: Sequence[TestbedNode], node: TestbedNode) -> list[TestbedNode]:
    return [other for other in nodes if zone_of(other) != zone_of(node)]
