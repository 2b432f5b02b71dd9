"""kube-scheduler extender v1: filter and prioritize. Pure.

Types are k8s.io/kube-scheduler/extender/v1. Those structs have no JSON tags,
so the wire keys are the Go field names: ExtenderArgs{Pod, Nodes, NodeNames},
ExtenderFilterResult{Nodes, NodeNames, FailedNodes,
FailedAndUnresolvableNodes, Error}, HostPriority{Host, Score}.

With ``nodeCacheCapable: false`` the scheduler sends ``Nodes`` (a full
NodeList) and expects ``Nodes`` back; with ``true`` it sends and expects
``NodeNames``. A result with neither would make the scheduler drop every
node, so we always answer in the form we were asked in, and only with names
we were given.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict

from kubectl_nettraffic.config import ExtenderSettings
from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.nodes import Node, ineligibility, node_from_json
from kubectl_nettraffic.labels import LabelSelector
from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.scoring.node_scores import NodeScore
from webhook.admission import HttpInputError

MAX_EXTENDER_PRIORITY = 10  # extenderv1.MaxExtenderPriority


class FilterResult(TypedDict):
    Nodes: NotRequired[dict[str, Any] | None]
    NodeNames: NotRequired[list[str] | None]
    FailedNodes: dict[str, str]
    FailedAndUnresolvableNodes: dict[str, str]
    Error: str


class HostPriority(TypedDict):
    Host: str
    Score: int


@dataclass(frozen=True)
class ExtenderArgs:
    pod: Mapping[str, Any]
    node_objects: list[dict[str, Any]] | None  # nodeCacheCapable false
    node_list: dict[str, Any] | None
    node_names: list[str] | None  # nodeCacheCapable true

    def names(self) -> list[str]:
        if self.node_names is not None:
            return list(self.node_names)
        return [str((n.get("metadata") or {}).get("name", "")) for n in self.node_objects or []]


def parse_args(body: Any) -> ExtenderArgs:
    if not isinstance(body, dict):
        raise HttpInputError("body is not a JSON object; send extender v1 ExtenderArgs")
    pod = body.get("Pod")
    if not isinstance(pod, dict):
        raise HttpInputError("ExtenderArgs.Pod is missing or not an object")
    nodes, names = body.get("Nodes"), body.get("NodeNames")
    if nodes is None and names is None:
        raise HttpInputError("ExtenderArgs has neither Nodes nor NodeNames; check nodeCacheCapable")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise HttpInputError("ExtenderArgs.NodeNames is not a list of node names")
        return ExtenderArgs(pod, None, None, names)
    if not isinstance(nodes, dict) or not isinstance(nodes.get("items") or [], list):
        raise HttpInputError("ExtenderArgs.Nodes is not a NodeList (an object with items)")
    items = [i for i in nodes.get("items") or [] if isinstance(i, dict)]
    for item in items:
        if not isinstance((item.get("metadata") or {}).get("name"), str):
            raise HttpInputError("a node in ExtenderArgs.Nodes.items has no metadata.name")
    return ExtenderArgs(pod, items, nodes, None)


def _over_limit(score: NodeScore, limits: ExtenderSettings) -> str | None:
    if limits.max_traffic and score.traffic is not None and score.traffic > limits.max_traffic:
        return f"traffic {score.traffic:.0f} B/s is above the extender limit {limits.max_traffic:.0f} B/s"
    if (
        limits.max_link_utilization
        and score.link_utilization is not None
        and score.link_utilization > limits.max_link_utilization
    ):
        return (
            f"link utilisation {score.link_utilization:.0%} is above the extender limit "
            f"{limits.max_link_utilization:.0%}"
        )
    return None


def filter_nodes(
    args: ExtenderArgs,
    snapshot: Snapshot | None,
    stale: bool,
    selector: LabelSelector,
    limits: ExtenderSettings,
) -> FilterResult:
    """Keep nodes the pod may use; give every dropped node its reason."""
    failed: dict[str, str] = {}
    unresolvable: dict[str, str] = {}
    if snapshot is not None and not stale:
        tolerations = (args.pod.get("spec") or {}).get("tolerations") or []
        given: dict[str, Node] = {}
        for obj in args.node_objects or []:
            try:
                given[obj["metadata"]["name"]] = node_from_json(obj)
            except ClusterError:
                continue
        scores = {s.name: s for s in snapshot.scores}
        for name in args.names():
            node = given.get(name) or snapshot.nodes.get(name)
            if node is None:
                continue  # a node we know nothing of: no opinion, keep it
            reason = ineligibility(node, selector, tolerations)
            if reason:
                # Preemption cannot fix readiness, cordons, labels or taints.
                unresolvable[name] = f"nettraffic: {reason}"
                continue
            over = _over_limit(scores[name], limits) if name in scores else None
            if over:
                failed[name] = f"nettraffic: {over}"
    dropped = failed.keys() | unresolvable.keys()
    result: FilterResult = {
        "FailedNodes": failed,
        "FailedAndUnresolvableNodes": unresolvable,
        "Error": "",
    }
    if args.node_names is not None:
        result["NodeNames"] = [n for n in args.node_names if n not in dropped]
        result["Nodes"] = None
    else:
        kept = [n for n in args.node_objects or [] if n["metadata"]["name"] not in dropped]
        result["Nodes"] = {**(args.node_list or {}), "items": kept}
        result["NodeNames"] = None
    return result


def prioritize(
    args: ExtenderArgs,
    snapshot: Snapshot | None,
    stale: bool,
    inflight: Mapping[str, tuple[float, int]],
) -> list[HostPriority]:
    """Score 0..10 per given node from the same scores as the webhook.

    Stale or missing data: every node gets the same score (no opinion).
    """
    names = args.names()
    if snapshot is None or stale:
        return [{"Host": name, "Score": 0} for name in names]
    scores = {s.name: s for s in snapshot.scores}
    priorities: list[HostPriority] = []
    for name in names:
        score = scores.get(name)
        if score is None or not score.has_data:
            value = 0
        else:
            live = score.score_with(inflight.get(name, (0.0, 0))[0])
            value = round(max(0.0, min(100.0, live)) * MAX_EXTENDER_PRIORITY / 100)
        priorities.append({"Host": name, "Score": value})
    return priorities
