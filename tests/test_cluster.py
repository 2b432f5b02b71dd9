"""Node inventory and metrics-server through the real kubernetes client
against the fake API server over HTTP."""

import json

import pytest

from harness.fakeapi import node, node_metrics
from kubectl_nettraffic.errors import ClusterError, SourceError
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.kube.cluster import list_nodes, load_node_file, node_cache
from kubectl_nettraffic.kube.nodes import ineligibility
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.sources.metrics_server import MetricsServerSource
from tests.conftest import wait_for


def test_list_parses_everything_eligibility_needs(fake_api, kubeconfig):
    fake_api.put(
        node("a", labels={"filter.xy.com": "yes"}, ip="10.1.0.1", cpu="3800m", memory="15Gi")
    )
    fake_api.put(node("b", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    fake_api.put(node("c", ready=False))
    fake_api.put(node("d", unschedulable=True))
    fake_api.put(node("e", taints=[{"key": "soft", "effect": "PreferNoSchedule"}]))
    nodes = {n.name: n for n in list_nodes(api_client(kubeconfig))}
    assert nodes["a"].allocatable_cpu == pytest.approx(3.8)
    assert nodes["a"].allocatable_memory == 15 * 2**30
    assert nodes["a"].internal_ips == ("10.1.0.1",)
    everyone = parse_selector("")
    assert ineligibility(nodes["a"], everyone) is None
    assert ineligibility(nodes["b"], everyone) == "tainted dedicated=gpu:NoSchedule"
    assert ineligibility(nodes["b"], everyone, [{"key": "dedicated", "operator": "Exists"}]) is None
    assert ineligibility(nodes["c"], everyone) == "not Ready"
    assert ineligibility(nodes["d"], everyone) == "cordoned (unschedulable)"
    assert ineligibility(nodes["e"], everyone) is None  # PreferNoSchedule only hints
    assert "not selected by nodes.selector" in ineligibility(
        nodes["b"], parse_selector("filter.xy.com")
    )


def test_watch_follows_changes_and_survives_410_and_disconnects(fake_api, kubeconfig):
    fake_api.put(node("a"))
    cache = node_cache(api_client(kubeconfig)).start()
    try:
        wait_for(lambda: "a" in cache.items())
        fake_api.put(node("b"))
        wait_for(lambda: "b" in cache.items())
        fake_api.put(node("a", ready=False))
        wait_for(lambda: not cache.items()["a"].ready)
        assert cache.relists == 1

        # A dropped connection: the cache re-watches from its last resourceVersion,
        # which etcd compacted meanwhile -> 410 Gone -> it lists again.
        fake_api.compact()
        fake_api.put(node("c"))
        fake_api.close_watches()
        wait_for(lambda: "c" in cache.items() and cache.relists >= 2)
        assert fake_api.gone_sent >= 1
        fake_api.delete(("api/v1", None, "nodes"), "b")
        wait_for(lambda: "b" not in cache.items())
        watches = [
            r for r in fake_api.requests if r.path == "/api/v1/nodes" and r.query.get("watch")
        ]
        assert any(r.query.get("allowWatchBookmarks") == ["true"] for r in watches)
    finally:
        cache.stop()
        fake_api.close_watches()


def test_unreachable_and_forbidden_api_give_one_clear_line(fake_api, kubeconfig):
    fake_api.forbidden.add(("GET", "/api/v1/nodes"))
    with pytest.raises(ClusterError, match="listing nodes: HTTP 403: RBAC forbids it"):
        list_nodes(api_client(kubeconfig))
    with pytest.raises(ClusterError, match="cannot load Kubernetes config"):
        api_client("/nonexistent/kubeconfig")


def test_metrics_server_usage(fake_api, kubeconfig):
    fake_api.put(node_metrics("a", "1500m", "4Gi"), plural="nodes")
    fake_api.put(node_metrics("b", "250000000n", "1024Ki"), plural="nodes")
    usage = MetricsServerSource(api_client(kubeconfig)).fetch()
    assert usage["a"].cpu == pytest.approx(1.5) and usage["a"].memory == 4 * 2**30
    assert usage["b"].cpu == pytest.approx(0.25) and usage["b"].memory == 2**20


def test_metrics_server_missing_says_so(fake_api, kubeconfig):
    with pytest.raises(SourceError, match="is metrics-server installed"):
        fake_api.forbidden.add(("GET", "/apis/metrics.k8s.io"))
        MetricsServerSource(api_client(kubeconfig)).fetch()


def test_node_file_source(tmp_path):
    path = tmp_path / "nodes.json"
    path.write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("x"), node("y")]})
    )
    assert [n.name for n in load_node_file(str(path))] == ["x", "y"]
    path.write_text("{not json")
    with pytest.raises(ClusterError, match="is not JSON.*kubectl get nodes -o json"):
        load_node_file(str(path))
    path.write_text("{}")
    with pytest.raises(ClusterError, match="is not a node list"):
        load_node_file(str(path))
