"""The testbed's short form (bench.testbed): real packets through network
namespaces shaped by tc, node_exporter in each node, the real Prometheus
and the real webhook over TLS. Latency-sensitive pods placed by nettraffic
must feel the hot nodes far less than under the default scheduler."""

import math
import os
import re
import time
import urllib.request

import pytest

from bench.testbed.cpus import measuring_cpu, off_the_measuring_cpu
from bench.testbed.network import TSO_RTT_LOG, WORLD_NAMESPACE, Network, run
from bench.testbed.observe import EXPORTER_PORT, NodeExporters
from bench.testbed.report import figures
from bench.testbed.run import leftovers, run_testbed, why_unavailable
from bench.testbed.settings import short_settings
from bench.testbed.workload import Sinks, start_pod_process
from kubectl_nettraffic.config import DEFAULT_DEVICE_EXCLUDE
from tests.conftest import wait_for


@pytest.fixture(scope="module")
def short_run():
    why = why_unavailable()
    if why is not None:
        pytest.skip(f"the testbed cannot run here: {why}")
    return run_testbed(short_settings(), log=lambda _: None)


def test_latency_pods_steered_by_nettraffic_beat_the_default_scheduler(short_run):
    by_policy = {r.policy: figures(r) for r in short_run.policies}
    ours, default = by_policy["nettraffic"], by_policy["default"]
    # The comparison shows something only where the default scheduler put a
    # latency pod beside a saturated link; its placements do not depend on
    # traffic, so with the short form's seed it always does.
    assert default.latency_on_hot >= 1
    assert ours.latency_on_hot == 0
    assert math.isfinite(ours.p99) and ours.p99 > 0
    assert default.p99 >= 3 * ours.p99, (ours.p99, default.p99)


def test_bulk_pods_steered_by_nettraffic_reach_their_rate_and_nothing_is_left_behind(short_run):
    # Bulk pods send in the direction the hot nodes' links are full in:
    # kept off them, they get their rate (the default scheduler's may not).
    for result in short_run.policies:
        assert result.bulk, result.policy
    ours = next(r for r in short_run.policies if r.policy == "nettraffic")
    for pod, achieved, target in ours.bulk:
        assert achieved >= 0.9 * target, (pod, achieved)
    assert short_run.leftovers == []
    assert leftovers() == []


def test_the_webhook_steered_every_pod_it_admitted(short_run):
    ours = next(r for r in short_run.policies if r.policy == "nettraffic")
    assert ours.webhook_failures == 0
    assert all(placed.preferred for placed in ours.placements)
    header, *rows = (line.split() for line in ours.top_at_peak.splitlines())
    link = header.index("LINK%")
    hot = {row[0] for row in rows if float(row[link].rstrip("%")) >= 80}
    assert len(hot) == short_run.settings.hot_nodes  # top shows the saturated links
    assert not any(placed.node in hot for placed in ours.placements)


@pytest.mark.parametrize("kernel_tcp_bursts", [False, True])
def test_tcp_bursts_are_sized_for_the_emulated_link(kernel_tcp_bursts):
    """Every namespace's TCP sizes bursts by pacing rate alone (tcp_tso_rtt_log
    0), unless the run asks for the kernel's own sizing for near peers."""
    why = why_unavailable()
    if why is not None:
        pytest.skip(f"the testbed cannot run here: {why}")
    if not os.path.exists(TSO_RTT_LOG):
        pytest.skip("this kernel (before 5.18) sizes TCP bursts by pacing rate alone")
    network = Network(["tb-node-1"], 50_000_000, kernel_tcp_bursts=kernel_tcp_bursts)
    try:
        namespaces = [WORLD_NAMESPACE, network.nodes[0].namespace]
        namespaces.append(network.add_pod(network.nodes[0]))
        values = {
            ns: run("sysctl", "-n", "net.ipv4.tcp_tso_rtt_log", namespace=ns).strip()
            for ns in namespaces
        }
    finally:
        network.close()
    # A new namespace starts at 9 whatever the host's value
    # (net/ipv4/tcp_ipv4.c, tcp_sk_init).
    expected = "9" if kernel_tcp_bursts else "0"
    assert values == dict.fromkeys(namespaces, expected)
    assert leftovers() == []


def test_the_round_trip_measurers_run_on_their_own_cpu_at_a_higher_priority(tmp_path):
    """The echo server and a latency pod's client run at nice -10 on the CPU
    kept for them (every emulated node shares the machine's cores); a bulk
    pod runs at the usual priority on the other CPUs, as the Testbed starts it."""
    why = why_unavailable()
    if why is not None:
        pytest.skip(f"the testbed cannot run here: {why}")
    own = measuring_cpu()
    if own is None:
        pytest.skip("one CPU: the measurers cannot have one of their own")
    others = set(os.sched_getaffinity(0)) - {own}
    network = Network(["tb-node-1"], 50_000_000)
    with off_the_measuring_cpu():
        sinks = Sinks(str(tmp_path), 1)
    pods = []
    try:
        with off_the_measuring_cpu():
            node = network.nodes[0]
            pods.append(
                start_pod_process("latency", network.add_pod(node), 0, str(tmp_path), "l", None)
            )
            port = sinks.take_port()
            pods.append(
                start_pod_process("bulk", network.add_pod(node), 1e6, str(tmp_path), "b", port)
            )
        echo_server = sinks.processes[0]  # inetd, started first
        time.sleep(0.5)  # `ip netns exec`, taskset and nice have exec'd into the programs
        seen = {
            name: (os.getpriority(os.PRIO_PROCESS, process.pid), os.sched_getaffinity(process.pid))
            for name, process in (
                ("echo server", echo_server),
                ("latency client", pods[0].process),
                ("bulk sender", pods[1].process),
            )
        }
    finally:
        for pod in pods:
            pod.stop()
        sinks.stop()
        network.close()
    assert seen == {
        "echo server": (-10, {own}),
        "latency client": (-10, {own}),
        "bulk sender": (0, others),
    }
    assert os.sched_getaffinity(0) == others | {own}  # the block gave the CPU back
    assert leftovers() == []


def _scraped(url: str) -> str | None:
    """The exporter's page; None while it is not listening yet."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return answer.read().decode()
    except OSError:
        return None


def test_node_exporter_shows_the_product_a_nodes_link_and_not_its_pods_veths(tmp_path):
    """On a Calico node the pods' veths are cali*, which the product's
    default device exclude drops; the testbed's must be too, or a node's
    traffic counts every pod's bytes twice."""
    why = why_unavailable()
    if why is not None:
        pytest.skip(f"the testbed cannot run here: {why}")
    network = Network(["tb-node-1"], 50_000_000)
    exporters = None
    try:
        node = network.nodes[0]
        network.add_pod(node)
        network.add_pod(node)
        exporters = NodeExporters(network.nodes, 50_000_000, str(tmp_path))
        text = wait_for(lambda: _scraped(f"http://{node.address}:{EXPORTER_PORT}/metrics"))
    finally:
        if exporters is not None:
            exporters.stop()
        network.close()
    devices = set(re.findall(r'node_network_receive_bytes_total\{device="([^"]+)"', text))
    assert len(devices - {"eth0", "lo"}) == 2, devices  # the two pods' veths
    # PromQL's !~ matches the whole value, as re.fullmatch does.
    counted = {d for d in devices if not re.fullmatch(DEFAULT_DEVICE_EXCLUDE, d)}
    assert counted == {"eth0"}
    assert leftovers() == []
