"""A scoreboard scored from fixed per-node traffic: the engine's pure
scoring inputs, for tests of what comes after the measurement."""

from typing import Any

from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.nodes import Node, node_from_json
from kubectl_nettraffic.scoreboard import Scoreboard
from kubectl_nettraffic.sources.prometheus import NodeTraffic, TrafficReport
from tests.harness.fakeapi import node

MEASURED_AT = 1000.0


class FixedTraffic:
    """What PrometheusSource.fetch answers, from a node -> bytes/s map."""

    def __init__(self, loads: dict[str, float]) -> None:
        self.loads = loads

    def fetch(self, _nodes: Any) -> TrafficReport:
        by_node = {n: NodeTraffic(v / 2, v / 2, None, ("x",)) for n, v in self.loads.items()}
        return TrafficReport(by_node, (), (), {}, (), MEASURED_AT)


def fixed_board(loads: dict[str, float], **nodes_kwargs: Any) -> Scoreboard:
    """A refreshed scoreboard over nodes named by ``loads`` (extra node() arguments by name)."""
    nodes: list[Node] = [node_from_json(node(name, **nodes_kwargs.get(name, {}))) for name in loads]
    settings = settings_from_mapping(
        {"prometheus": {"url": "http://unused"}, "metricsServer": {"enabled": False}}
    )
    board = Scoreboard(
        settings,
        lambda: nodes,
        FixedTraffic(loads),  # type: ignore[arg-type]
        None,
        clock=lambda: MEASURED_AT,
    )
    board.refresh()
    return board
