"""kube-scheduler extender v1: filter and prioritize, the wire format. Pure;
the rules are the engine's (steering/extender_rules.py, through serving.py).

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

from kubectl_nettraffic.serving import Filtered
from webhook.admission import HttpInputError


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


def filter_result(args: ExtenderArgs, failed: Filtered) -> FilterResult:
    """The ExtenderFilterResult: the nodes kept, in the form they came in."""
    dropped = failed.failed.keys() | failed.unresolvable.keys()
    result: FilterResult = {
        "FailedNodes": failed.failed,
        "FailedAndUnresolvableNodes": failed.unresolvable,
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


def priorities(scores: list[tuple[str, int]]) -> list[HostPriority]:
    return [{"Host": name, "Score": score} for name, score in scores]
