"""The Nodes a simulation's node list returns, each with the labels written
on it so far (the zone, the tier label writer's), as the API server lists them."""

from collections.abc import Mapping, Sequence

from harness.fakeapi import node
from kubectl_nettraffic.kube.nodes import Node, node_from_json


def labelled_nodes(names: Sequence[str], labels: Sequence[Mapping[str, str]]) -> list[Node]:
    return [
        node_from_json(node(name, labels=dict(own)))
        for name, own in zip(names, labels, strict=True)
    ]
