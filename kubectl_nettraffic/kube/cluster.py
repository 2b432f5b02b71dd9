"""Nodes and namespaces as the engine reads them from the API server: a
list, a node file, or a cache kept fresh by list + watch (reflector.py)."""

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client as k8s

from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.client import api_call, request_json
from kubectl_nettraffic.kube.nodes import Node, node_from_json, nodes_from_list
from kubectl_nettraffic.kube.reflector import ListWatchCache


def node_list(api: k8s.ApiClient, label_selector: str = "") -> Mapping[str, Any]:
    """The API server's NodeList as JSON, for readers that need fields Node
    leaves out (the descheduler's own readiness rule, rebalance.py)."""
    with api_call("listing nodes"):
        document: Mapping[str, Any] = request_json(
            api, "GET", "/api/v1/nodes", query={"labelSelector": label_selector or None}
        )
    return document


def list_nodes(api: k8s.ApiClient, label_selector: str = "") -> list[Node]:
    return nodes_from_list(node_list(api, label_selector), "the API server's node list")


def load_node_file(path: str) -> list[Node]:
    """Nodes from ``kubectl get nodes -o json`` saved to a file."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise ClusterError(f"nodes.file {path!r} does not exist; check the path") from None
    except ValueError as error:
        raise ClusterError(
            f"nodes.file {path!r} is not JSON ({error}); save it with kubectl get nodes -o json"
        ) from None
    return nodes_from_list(document, f"nodes.file {path!r}")


def node_cache(api: k8s.ApiClient) -> ListWatchCache[Node]:
    return ListWatchCache(api, "/api/v1/nodes", node_from_json, "nodes")


def namespace_labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def namespace_cache(api: k8s.ApiClient) -> ListWatchCache[Mapping[str, str]]:
    return ListWatchCache(api, "/api/v1/namespaces", namespace_labels, "namespaces")
