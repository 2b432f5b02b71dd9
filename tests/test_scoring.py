"""score_nodes on hand-computed cases: traffic mode on links of different speeds."""

import pytest

from harness.fakeapi import node
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.nodes import node_from_json
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.scoring.node_scores import NodeScore, score_nodes
from kubectl_nettraffic.scoring.readings import NodeTraffic

GBIT = 1.25e8  # bytes/s


def _score(
    links: dict[str, tuple[float, float | None]], mode: str = "traffic"
) -> dict[str, NodeScore]:
    """node -> score for {node: (receive bytes/s, link speed)}; nothing transmitted."""
    nodes = [node_from_json(node(name)) for name in links]
    traffic = {
        name: NodeTraffic(receive, 0.0, speed, ("x",)) for name, (receive, speed) in links.items()
    }
    settings = settings_from_mapping({"scoring": {"mode": mode}}).scoring
    ranked = score_nodes(nodes, traffic, None, settings, "both", parse_selector(""))
    return {score.name: score for score in ranked}


def test_equal_links_rank_by_bytes():
    scores = _score({"a": (100e6, 10 * GBIT), "b": (300e6, 10 * GBIT), "c": (0.0, 10 * GBIT)})
    assert scores["a"].score == pytest.approx(100 * (1 - 100 / 300))
    assert scores["b"].score == pytest.approx(0.0)
    assert scores["c"].score == pytest.approx(100.0)
    # The busiest load is below every link's speed: the load sets the penalty.
    assert scores["a"].penalty_per_byte == pytest.approx(100 / 300e6)


def test_a_full_slow_link_is_not_quiet_next_to_a_fast_busy_one():
    # 100 MB/s is 80% of 1 Gbit/s but a third of the busiest node's bytes.
    scores = _score({"slow": (100e6, GBIT), "fast": (300e6, 25 * GBIT), "idle": (0.0, GBIT)})
    assert scores["slow"].score == pytest.approx(100 * (1 - 0.8))
    assert scores["fast"].score == pytest.approx(0.0)  # still the most bytes
    assert scores["idle"].score == pytest.approx(100.0)
    # Each byte fills the 1 Gbit/s link faster than the load term says.
    assert scores["slow"].penalty_per_byte == pytest.approx(100 / GBIT)
    assert scores["fast"].penalty_per_byte == pytest.approx(100 / 300e6)
    # 10 MB/s more on the idle slow node costs 8 points, not 3.3.
    assert scores["idle"].score_with(10e6) == pytest.approx(92.0)


def test_an_unknown_link_speed_ranks_by_bytes_alone():
    scores = _score({"unknown": (100e6, None), "busy": (300e6, None)})
    assert scores["unknown"].score == pytest.approx(100 * (1 - 100 / 300))
    assert scores["unknown"].link_utilization is None


def test_link_utilization_mode_ranks_by_utilisation_alone():
    scores = _score({"slow": (100e6, GBIT), "fast": (300e6, 25 * GBIT)}, mode="link-utilization")
    assert scores["slow"].score == pytest.approx(20.0)
    assert scores["fast"].score == pytest.approx(100 * (1 - 300e6 / (25 * GBIT)))
