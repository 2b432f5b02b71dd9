"""The testbed's network: nodes are network namespaces on one bridge.

Every name this module creates starts with ``PREFIX``, so a run that was
killed is cleaned up by the next one (``remove_leftovers``). Addresses come
from 198.18.0.0/15, the range RFC 2544 reserves for benchmarking networks:
198.18.0.0/24 on the bridge (the host 198.18.0.1, node i 198.18.0.(10+i),
the outside world 198.18.0.254, the probe 198.18.0.253) and 198.19.i.0/24 for the pods of node i.
Nothing is routed off the bridge.

A node's link is its ``eth0``: a veth whose two ends are each shaped by an
HTB class at the link rate (egress on the node's end is the node's transmit
direction, egress on the bridge's end its receive direction), with a
``pfifo`` of ``QUEUE_PACKETS`` under it: the NIC's queue a bulk flow fills
and a small request waits behind. Offloads are off on every veth, so the
shaper sees wire-sized packets, not 64 KiB GSO segments. A pod is a network
namespace of its own, joined to its node by a veth routed the way Calico
does it (a /32 on the pod, proxy ARP on the node's end), so a pod's traffic
crosses its node's eth0 and the pod's own counters are its cAdvisor
counters. The node's end is named as Calico names it (``calico_veth_name``),
so node_exporter reports it as on a Calico node and the product's default
``prometheus.deviceExclude`` leaves it out, as it must: a pod's bytes
counted on its veth as well as on eth0 would show a node's sends as
receives too, and two pods talking on one node as traffic its NIC never
carries.

TCP in every namespace sizes its bursts by its pacing rate alone
(``net.ipv4.tcp_tso_rtt_log=0``, the kernel's rule before Linux 5.18). Since
5.18 the kernel adds up to 64 KiB to a burst for a peer whose minimum RTT is
under a few hundred microseconds (net/ipv4/tcp_output.c,
``tcp_tso_autosize``), on the grounds that such a peer sits behind a fast
link. Here every peer is microseconds away over a link two hundred times
slower than a data-centre NIC (an HTB shaper adds no serialisation delay to
the RTT TCP measures), so that allowance would send bursts whose time on
the link is two hundred times what it is on the NIC the testbed stands for.
``kernel_tcp_bursts=True`` keeps the kernel's default.
"""

import hashlib
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

PREFIX = "ntb"
BRIDGE = f"{PREFIX}0"
HOST_ADDRESS = "198.18.0.1"
WORLD_ADDRESS = "198.18.0.254"
WORLD_NAMESPACE = f"{PREFIX}-world"
PROBE_ADDRESS = "198.18.0.253"
PROBE_NAMESPACE = f"{PREFIX}-probe"
# 100 packets: 24 ms at 50 Mbit/s. Data-centre NICs and top-of-rack ports
# hold a few hundred microseconds to tens of milliseconds; Linux's default
# txqueuelen (1,000) would be ten times this.
QUEUE_PACKETS = 100
TSO_RTT_LOG = "/proc/sys/net/ipv4/tcp_tso_rtt_log"


class NetworkError(RuntimeError):
    pass


def run(*command: str, namespace: str | None = None, check: bool = True) -> str:
    """Run one command (inside ``namespace`` if given); its stdout."""
    argv = ["ip", "netns", "exec", namespace, *command] if namespace else list(command)
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise NetworkError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def can_create_namespaces() -> str | None:
    """None when this process may build the testbed, else why not."""
    if os.geteuid() != 0:
        return "the testbed needs root (network namespaces, veth, tc)"
    for tool in ("ip", "tc", "ethtool"):
        if subprocess.run(["which", tool], capture_output=True).returncode != 0:
            return f"{tool} is not installed (Debian: iproute2, ethtool)"
    probe = f"{PREFIX}-check-{os.getpid()}"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"cannot create a network namespace: {done.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def calico_veth_name(workload: str) -> str:
    """The node's end of a pod's veth as Calico's CNI plugin names it:
    "cali" and the first 11 hex digits of a SHA-1 of the workload
    (libcalico-go, lib/backend/k8s/conversion/conversion.go,
    VethNameForWorkload: of "namespace.pod", prefix FELIX_INTERFACEPREFIX,
    by default "cali"). Here the workload is the pod's network namespace."""
    return "cali" + hashlib.sha1(workload.encode()).hexdigest()[:11]


def remove_leftovers() -> list[str]:
    """Kill every process in a namespace a testbed run left behind, delete
    the namespaces and links; their names. (Deleting a namespace alone
    would leave its processes running, in a namespace without a name.)"""
    removed = []
    for line in run("ip", "netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(PREFIX + "-"):
            for pid in run("ip", "netns", "pids", name, check=False).split():
                run("kill", "-KILL", pid, check=False)
            run("ip", "netns", "del", name, check=False)
            removed.append(name)
    for line in run("ip", "-o", "link", "show").splitlines():
        parts = line.split(": ")
        if len(parts) > 1:
            name = parts[1].split("@")[0]
            if name.startswith(PREFIX):
                run("ip", "link", "del", name, check=False)
                removed.append(name)
    return removed


def _quiet_offloads(device: str, namespace: str | None = None) -> None:
    run("ethtool", "-K", device, "tso", "off", "gso", "off", "gro", "off", namespace=namespace)


def _shape(device: str, rate_bits: int, namespace: str | None = None) -> None:
    """HTB at ``rate_bits`` on ``device``'s egress, a pfifo under it. A
    burst of two packets: the shaper lets no more through at line rate."""
    rate = f"{rate_bits}bit"
    for command in (
        f"tc qdisc replace dev {device} root handle 1: htb default 10",
        f"tc class add dev {device} parent 1: classid 1:10 htb rate {rate} ceil {rate}"
        " burst 3000 cburst 3000",
        f"tc qdisc add dev {device} parent 1:10 handle 10: pfifo limit {QUEUE_PACKETS}",
    ):
        run(*command.split(), namespace=namespace)


@dataclass(frozen=True)
class TestbedNode:
    index: int  # 1-based
    name: str  # the Kubernetes node name, and its uname nodename
    namespace: str
    address: str

    @property
    def pod_subnet(self) -> str:
        return f"198.19.{self.index}"


class Network:
    """The bridge, the outside world and the nodes; ``close`` removes them all."""

    def __init__(
        self, node_names: Sequence[str], link_bits: int, kernel_tcp_bursts: bool = False
    ) -> None:
        self.link_bits = link_bits
        self.kernel_tcp_bursts = kernel_tcp_bursts
        self.nodes: list[TestbedNode] = []
        self.pod_addresses: dict[str, str] = {}  # a pod's namespace -> its address
        self._pod_count = 0
        remove_leftovers()
        try:
            self._build(node_names)
        except BaseException:
            self.close()
            raise

    def _build(self, node_names: Sequence[str]) -> None:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{HOST_ADDRESS}/24", "dev", BRIDGE)
        run("ip", "link", "set", BRIDGE, "up")
        self._attach(WORLD_NAMESPACE, f"{PREFIX}w", WORLD_ADDRESS)
        # The probe: a link like a node's that carries nothing but the
        # reference latency client, the idle link's figure beside each run.
        self._attach(PROBE_NAMESPACE, f"{PREFIX}q", PROBE_ADDRESS)
        _shape("eth0", self.link_bits, PROBE_NAMESPACE)
        _shape(f"{PREFIX}q", self.link_bits)
        for index, name in enumerate(node_names, start=1):
            node = TestbedNode(index, name, f"{PREFIX}-n{index}", f"198.18.0.{10 + index}")
            self._attach(node.namespace, f"{PREFIX}n{index}", node.address)
            _shape("eth0", self.link_bits, node.namespace)
            _shape(f"{PREFIX}n{index}", self.link_bits)
            run("sysctl", "-qw", "net.ipv4.ip_forward=1", namespace=node.namespace)
            run(
                "ip",
                "route",
                "add",
                f"{node.pod_subnet}.0/24",
                "via",
                node.address,
                namespace=WORLD_NAMESPACE,
            )
            self.nodes.append(node)

    def _attach(self, namespace: str, outer: str, address: str) -> None:
        """A namespace with an eth0 on the bridge at ``address``."""
        run("ip", "netns", "add", namespace)
        run("ip", "link", "add", outer, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        run("ip", "link", "set", outer, "master", BRIDGE, "up")
        _quiet_offloads(outer)
        _quiet_offloads("eth0", namespace)
        run("ip", "addr", "add", f"{address}/24", "dev", "eth0", namespace=namespace)
        run("ip", "link", "set", "eth0", "up", namespace=namespace)
        run("ip", "link", "set", "lo", "up", namespace=namespace)
        self._size_tcp_bursts(namespace)

    def _size_tcp_bursts(self, namespace: str) -> None:
        """TCP in ``namespace`` sizes bursts by its pacing rate alone, unless
        the run keeps the kernel's sizing (see the module's doc). Kernels
        before 5.18 have no such sysctl and size them so already."""
        if not self.kernel_tcp_bursts and os.path.exists(TSO_RTT_LOG):
            run("sysctl", "-qw", "net.ipv4.tcp_tso_rtt_log=0", namespace=namespace)

    # ------------------------------------------------------------- pods

    def add_pod(self, node: TestbedNode) -> str:
        """A new pod's network namespace on ``node``; its name."""
        self._pod_count += 1
        pod_id = self._pod_count
        namespace = f"{PREFIX}-p{pod_id}"
        outer = calico_veth_name(namespace)  # in the node's namespace only
        address = f"{node.pod_subnet}.{10 + pod_id % 240}"
        run("ip", "netns", "add", namespace)
        run(
            *f"ip link add {outer} netns {node.namespace} type veth peer name eth0".split(),
            "netns",
            namespace,
        )
        _quiet_offloads(outer, node.namespace)
        _quiet_offloads("eth0", namespace)
        run("sysctl", "-qw", f"net.ipv4.conf.{outer}.proxy_arp=1", namespace=node.namespace)
        # Answer at once: the kernel delays proxy ARP replies by up to 0.8 s
        # by default, which a new pod would feel as lost first requests.
        run("sysctl", "-qw", f"net.ipv4.neigh.{outer}.proxy_delay=0", namespace=node.namespace)
        run("ip", "link", "set", outer, "up", namespace=node.namespace)
        run("ip", "route", "add", f"{address}/32", "dev", outer, namespace=node.namespace)
        run("ip", "addr", "add", f"{address}/32", "dev", "eth0", namespace=namespace)
        run("ip", "link", "set", "eth0", "up", namespace=namespace)
        run("ip", "link", "set", "lo", "up", namespace=namespace)
        # On-link default: the node's end answers ARP for whatever it routes.
        run("ip", "route", "add", "default", "dev", "eth0", namespace=namespace)
        self._size_tcp_bursts(namespace)
        self.pod_addresses[namespace] = address
        return namespace

    def route_pods_between_nodes(self) -> None:
        """Each node routes the other nodes' pod subnets through them, as a
        CNI does, so pods on two nodes talk over both nodes' links."""
        for node in self.nodes:
            for other in self.nodes:
                if other is not node:
                    subnet = f"{other.pod_subnet}.0/24"
                    run(
                        "ip", "route", "add", subnet, "via", other.address, namespace=node.namespace
                    )

    def remove_pod(self, namespace: str) -> None:
        """Delete the pod's namespace: its veth, and the node's route to it, go with it."""
        run("ip", "netns", "del", namespace, check=False)
        self.pod_addresses.pop(namespace, None)

    def close(self) -> None:
        remove_leftovers()
