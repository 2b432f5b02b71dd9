"""`kubectl nettraffic rebalance` through the real kubectl: node traffic and
per-pod rates from a real Prometheus (backfilled node_exporter, cAdvisor and
kube-state-metrics series), nodes and pods from the fake API server. Golden
outputs: UPDATE_GOLDEN=1 rewrites them after a deliberate change."""

import json
import shutil
import time

import pytest
import yaml

from harness.fakeapi import FakeKubeAPI, node
from harness.prometheus import Device, Exporter, prometheus_with_history
from harness.reviews import pod
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, kube_lines
from tests.harness.plugin import kubeconfig_in_namespace, kubectl_nettraffic
from tests.test_render import _golden

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl not on PATH (run through .ci/test)"
)

GIGABIT = 1.25e8  # bytes/s
# hot 88% of its link, warm 48%, cool 8%, spare (10 Gbit/s) under 1%.
NODES = {"hot": (110e6, 5e6, GIGABIT), "warm": (60e6, 2e6, GIGABIT),
         "cool": (10e6, 1e6, GIGABIT), "spare": (1e6, 1e6, 10 * GIGABIT)}  # fmt: skip
OLD, YOUNG = "2026-01-01T00:00:00Z", None  # YOUNG: created now


def _pods() -> list[tuple[PodSeries, dict]]:
    """(rates, the pod's API fields): name, node, owner, priority, QoS, created."""
    rows = [
        ("shop", "web-7d-a", "hot", 40e6, "ReplicaSet", "web-7d", None, "Burstable", OLD),
        ("shop", "web-7d-b", "warm", 20e6, "ReplicaSet", "web-7d", None, "Burstable", OLD),
        ("shop", "cache-0", "hot", 15e6, "StatefulSet", "cache", 1000, "Guaranteed", OLD),
        ("shop", "cache-1", "cool", 5e6, "StatefulSet", "cache", 1000, "Guaranteed", OLD),
        ("shop", "fresh-5c-a", "hot", 9e6, "ReplicaSet", "fresh-5c", None, "BestEffort", YOUNG),
        ("shop", "fresh-5c-b", "cool", 1e6, "ReplicaSet", "fresh-5c", None, "BestEffort", YOUNG),
        ("batch", "etl-x9", "hot", 30e6, "Job", "etl", None, "BestEffort", OLD),
        ("kube-system", "agent-h", "hot", 2e6, "DaemonSet", "agent", None, "Burstable", OLD),
    ]
    pods = []
    for namespace, name, where, rx, kind, owner, priority, qos, created in rows:
        series = PodSeries(namespace, name, rx, rx / 20, kind, owner, node=where)
        obj = pod(name=name, namespace=namespace, owner_kind=kind)
        obj["metadata"]["ownerReferences"][0]["name"] = owner
        obj["metadata"]["creationTimestamp"] = created or time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime()
        )
        obj["spec"]["nodeName"] = where
        if priority is not None:
            obj["spec"]["priority"] = priority
        obj["status"] = {"phase": "Running", "qosClass": qos}
        pods.append((series, obj))
    return pods


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    end = float(int(time.time()) + 600)
    pods = _pods()
    exporters = [
        Exporter(f"10.4.0.{i}:9100", name, [Device("eth0", rx, tx, speed)])
        for i, (name, (rx, tx, speed)) in enumerate(NODES.items())
    ]
    more = list(
        kube_lines([s for s, _ in pods], [ReplicaSetSeries("shop", "web-7d", "web")], end, 900)
    )
    prometheus = prometheus_with_history(exporters, end, duration=900, more=more)
    api = FakeKubeAPI()
    for name in NODES:
        api.put(node(name))
    for _, obj in pods:
        api.put(obj, plural="pods")
    pending = pod(name="pending-1", namespace="shop")  # not bound: not a node's load
    pending["status"] = {"phase": "Pending"}
    api.put(pending, plural="pods")
    # Bound but finished: listed away by the status.phase=Running field selector.
    done = pod(name="done-1", namespace="batch", owner_kind="Job")
    done["metadata"]["creationTimestamp"] = OLD
    done["spec"]["nodeName"] = "hot"
    done["status"] = {"phase": "Succeeded", "qosClass": "BestEffort"}
    api.put(done, plural="pods")
    directory = tmp_path_factory.mktemp("rebalance")
    kubeconfig = kubeconfig_in_namespace(api, str(directory / "kubeconfig"), "shop")
    config = directory / "config.yaml"
    config.write_text(
        f"prometheus: {{url: '{prometheus.url}', window: 2m}}\nmetricsServer: {{enabled: false}}\n"
    )
    yield kubeconfig, str(config), prometheus
    api.stop()
    prometheus.stop()


def _rebalance(setup, *args):
    kubeconfig, config, _ = setup
    return kubectl_nettraffic(
        kubeconfig, "rebalance", *args, "--config", config, "--source", "prometheus"
    )


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("rebalance.txt", ()),
        ("rebalance-all.txt", ("-A",)),
        ("rebalance-threshold-50.txt", ("-A", "--threshold", "50", "--low-threshold", "40")),
        ("rebalance-none-over.txt", ("--threshold", "95", "--no-headers")),
    ],
)
def test_golden(setup, name, args):
    result = _rebalance(setup, *args)
    assert result.returncode == 0, result.stderr
    _golden(name, result.stdout)


def test_the_plan_as_json_and_yaml(setup):
    flags = ("-A", "--threshold", "50", "--low-threshold", "40")
    as_json = json.loads(_rebalance(setup, *flags, "-o", "json").stdout)
    as_yaml = yaml.safe_load(_rebalance(setup, *flags, "-o", "yaml").stdout)
    assert {**as_json, "generatedAt": None} == {**as_yaml, "generatedAt": None}
    (hot,) = as_json["nodes"]
    # 115 MB/s busiest (110 received + web's and others' counted by the node's
    # NIC) over 125 MB/s: 88%. web-7d-a goes first (no priority, Burstable),
    # then cache-0 (priority 1000): 110 - 40 - 15 = 55 MB/s, 44%.
    assert hot["name"] == "hot" and hot["linkUtilization"] == pytest.approx(0.88, abs=0.005)
    assert hot["after"] == pytest.approx(0.44, abs=0.005)
    pods = {p["name"]: p for p in hot["pods"]}
    assert (pods["web-7d-a"]["evictionOrder"], pods["web-7d-a"]["movesTo"]) == (1, "spare")
    assert (pods["cache-0"]["evictionOrder"], pods["cache-0"]["cycle"]) == (2, 2)
    assert pods["etl-x9"]["notEvictable"] == "Job/etl has 1 pod(s), under minReplicas 2"
    assert pods["agent-h"]["notEvictable"] == "namespace kube-system is not evictable"
    assert pods["fresh-5c-a"]["notEvictable"] == "younger than minPodAge (600s)"
    assert pods["web-7d-a"]["trafficBytesPerSecond"] == pytest.approx(42e6, rel=0.01)
    assert as_json["cycles"] == 2 and as_json["threshold"] == 50


def test_evictions_per_node_leave_in_one_cycle(setup):
    flags = ("-A", "--threshold", "50", "--low-threshold", "40", "--evictions-per-node", "2")
    plan = json.loads(_rebalance(setup, *flags, "-o", "json").stdout)
    pods = {p["name"]: p for p in plan["nodes"][0]["pods"]}
    assert (pods["web-7d-a"]["cycle"], pods["cache-0"]["cycle"]) == (1, 1)
    assert plan["cycles"] == 1 and plan["evictionsPerNode"] == 2


def test_bad_thresholds_are_one_line_with_the_fix(setup):
    result = _rebalance(setup, "--threshold", "30", "--low-threshold", "40")
    assert result.returncode == 1
    assert result.stderr.startswith("error: --low-threshold 40 and --threshold 30: use 0 <= low")
