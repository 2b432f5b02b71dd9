"""The placement benchmark's parts: the kube-scheduler scoring model follows
the plugins' rules, and the simulation (real engine) separates the strategies."""

import numpy as np
import pytest

pytest.importorskip("numpy")

from bench.placement import STRATEGIES, Scenario, summarise
from bench.scheduler_model import (
    ClusterState,
    node_affinity_scores,
    schedule,
    topology_spread_scores,
)


def _state(n: int = 4) -> ClusterState:
    return ClusterState(
        np.full(n, 16.0), np.full(n, 64.0), np.zeros(n), np.zeros(n), np.arange(n) % 2
    )


def test_node_affinity_is_normalised_by_the_maximum():
    assert list(node_affinity_scores({0: 100, 2: 50}, 4)) == [100.0, 0.0, 50.0, 0.0]
    assert list(node_affinity_scores({}, 3)) == [0.0, 0.0, 0.0]


def test_topology_spread_prefers_nodes_with_fewer_replicas():
    state = _state()
    state.replicas["web"] = np.array([3.0, 0.0, 1.0, 0.0])
    scores = topology_spread_scores(state, "web")
    assert scores[1] == scores.max() and scores[0] == scores.min()
    assert list(topology_spread_scores(_state(), "other")) == [100.0] * 4


def test_schedule_follows_a_strong_preference_and_books_resources():
    state = _state()
    chosen = schedule(state, "web", 1.0, 2.0, {3: 100}, np.random.default_rng(0))
    assert chosen == 3 and state.cpu_requested[3] == 1.0 and state.replicas["web"][3] == 1


def test_simulation_separates_the_strategies():
    scenario = Scenario("smoke", nodes=20, bursts=4)
    results = {strategy: summarise(scenario, strategy, [0, 1])[0] for strategy in STRATEGIES}
    assert results["oracle"].hot_share == 0
    assert results["nettraffic"].hot_share <= results["default"].hot_share
    assert results["nettraffic"].hot_share <= results["tutorial"].hot_share
    assert results["nettraffic"].max_utilisation <= results["tutorial"].max_utilisation
