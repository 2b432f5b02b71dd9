"""Serving parts fed from fixed per-node traffic: the real Measurer, scoring
and Scoreboard over set inputs, for tests of what comes after the measurement."""

import dataclasses
import math
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any, cast

from harness.fakeapi import node
from harness.reviews import pod
from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.inflight.state import InflightState
from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL, ZONE_LABEL, Node, node_from_json
from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.measuring.measurement import Measurer, Snapshot
from kubectl_nettraffic.measuring.scoreboard import Scoreboard
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.serving import serving_parts
from kubectl_nettraffic.sources.prometheus import TrafficReport
from kubectl_nettraffic.steering.steerer import Steerer

MEASURED_AT = 1000.0


class FixedTraffic:
    """What PrometheusSource.fetch answers, from a node -> bytes/s map;
    ``link_speed``: every node's, or node -> its own."""

    def __init__(
        self, loads: dict[str, float], link_speed: float | Mapping[str, float] | None = None
    ) -> None:
        self.loads = loads
        self.link_speed = link_speed
        self.measured_at = MEASURED_AT

    def fetch(self, _nodes: Any) -> TrafficReport:
        speed = self.link_speed
        by_node = {
            n: NodeTraffic(
                v / 2, v / 2, speed.get(n) if isinstance(speed, Mapping) else speed, ("x",)
            )
            for n, v in self.loads.items()
        }
        return TrafficReport(by_node, (), (), {}, (), self.measured_at)


class FixedBoard:
    """A measured scoreboard with its in-flight state and Steerer; ``loads``
    is read again at every ``refresh``."""

    def __init__(
        self,
        loads: dict[str, float],
        clock: Callable[[], float] = lambda: MEASURED_AT,
        replica: str | None = None,
        link_speed: float | Mapping[str, float] | None = None,
        steering: dict[str, Any] | None = None,
        learning: BandwidthLearning | None = None,
        settings: Settings | None = None,
        **nodes_kwargs: Any,
    ) -> None:
        nodes: list[Node] = [
            node_from_json(node(name, **nodes_kwargs.get(name, {}))) for name in loads
        ]
        self.settings = settings or settings_from_mapping(
            {
                "prometheus": {"url": "http://unused"},
                "metricsServer": {"enabled": False},
                "steering": steering or {},
            }
        )
        self.traffic = FixedTraffic(loads, link_speed)
        self.measurer = Measurer(
            self.settings,
            lambda: nodes,
            self.traffic,  # type: ignore[arg-type]
            None,
            clock=clock,
            learning=learning,
        )
        serving = self.serving = serving_parts(self.settings, clock=clock, replica=replica)
        self.scoreboard: Scoreboard = serving.scoreboard
        self.inflight: InflightState = serving.inflight
        self.steerer: Steerer = serving.steerer
        self.refresh()

    @property
    def snapshot(self) -> Snapshot:
        snapshot = self.scoreboard.snapshot
        assert snapshot is not None
        return snapshot

    def refresh(self) -> Snapshot | None:
        return self.scoreboard.record(self.measurer.measure())

    def measure_with(self, conversations: Conversations) -> None:
        """A new measurement whose learned figures carry ``conversations``."""
        outcome = self.measurer.measure()
        assert outcome.snapshot is not None
        learned = LearnedBandwidth({}, None, 0.0, conversations)
        snapshot = dataclasses.replace(outcome.snapshot, learned=learned)
        self.scoreboard.record(dataclasses.replace(outcome, snapshot=snapshot))

    def measure_at(self, at: float) -> Snapshot | None:
        """A measurement taken at ``at``: the bookings of pods admitted long
        enough before it are forgotten, their traffic in the figures."""
        self.traffic.measured_at = at
        return self.refresh()


def fixed_board(loads: dict[str, float], **nodes_kwargs: Any) -> FixedBoard:
    """A refreshed board over nodes named by ``loads`` (extra node() arguments by name)."""
    return FixedBoard(loads, **nodes_kwargs)


def zoned_board(replica: str) -> FixedBoard:
    """Nodes a, b, c in zones of their own, a the quietest; zones kept even."""
    loads = {"a": 0.0, "b": 1e6, "c": 2e6}
    zones = {name: {"labels": {ZONE_LABEL: f"zone-{name}"}} for name in loads}
    return FixedBoard(loads, replica=replica, steering={"zoneMaxSkew": 1}, **zones)


def peer_board(
    loads: dict[str, float],
    conversations: Conversations,
    replica: str | None = None,
    **steering: Any,
) -> FixedBoard:
    """Nodes named by their zone's letter (each carrying its zone's copy, as
    the tier label writer writes it) with ``loads``, measured with the
    peers of ``conversations``, and a Steerer that pulls by them (a flow
    source set)."""
    zones = {name: {"labels": {ZONE_LABEL: name[0], ZONE_COPY_LABEL: name[0]}} for name in loads}
    board = FixedBoard(loads, replica=replica, steering=steering, **zones)
    board.measure_with(conversations)
    settings = board.settings
    board.steerer.settings = dataclasses.replace(
        settings, peers=dataclasses.replace(settings.peers, source="istio")
    )
    return board


def first_choice(board: FixedBoard) -> str:
    """The node a light pod of harness.reviews' workload would be steered to first."""
    decided = board.steerer.decide(pod(annotations={EXPECTED_BANDWIDTH: "1k"}), {}, dry_run=True)
    return str(decided.preferences[0].node)


def adopted(inflight: InflightState) -> Snapshot:
    """The snapshot ``inflight`` decides by: what an admission given a
    stale copy decides by instead (it follows only newer ones)."""
    stale = cast(Snapshot, SimpleNamespace(generated_at=-math.inf))
    with inflight.admission(stale) as admission:
        return admission.snapshot
