"""The rebalancing benchmark's descheduler model, each rule on a hand-computed
case (the rules cite their descheduler source in bench/descheduler_model.py),
and the simulation: the loop removes hot node-minutes that drift creates and
evicts nothing without drift."""

import numpy as np

from bench.descheduler_model import LoopPolicy, RunningPod, classify, cycle, reading
from bench.rebalancing_simulation import DriftScenario, simulate

POLICY = LoopPolicy()
NOW = 10_000.0


def test_the_reading_is_whole_percent_truncated_and_clamped():
    assert [reading(u) for u in (0.0, 0.4, 0.809, 0.81, 1.3)] == [0, 40, 80, 81, 100]


def test_classification_at_or_below_low_over_high_busiest_first():
    under, over = classify([30, 85, 95, 40, 75, 41], POLICY)
    assert under == [0, 3]  # 40 is at the low threshold: under
    assert over == [2, 1]  # 75 is not above 75


def _pods(node: int, count: int, started: float = 0.0) -> list[RunningPod]:
    return [RunningPod(node * 100 + i, node, started) for i in range(count)]


def test_one_eviction_per_over_node_per_cycle_even_with_a_higher_limit():
    pods = {1: _pods(1, 5), 2: _pods(2, 5)}
    policy = LoopPolicy(evictions_per_node=3)
    evicted = cycle([0.1, 0.9, 0.95], pods, NOW, policy, np.random.default_rng(0))
    assert sorted(p.node for p in evicted) == [1, 2]


def test_nothing_without_an_under_node_or_an_over_node():
    pods = {0: _pods(0, 3), 1: _pods(1, 3)}
    rng = np.random.default_rng(0)
    assert cycle([0.5, 0.9], pods, NOW, POLICY, rng) == []  # no node at or below 40%
    assert cycle([0.1, 0.7], pods, NOW, POLICY, rng) == []  # none above 80%


def test_young_pods_stay():
    young = _pods(1, 2, started=NOW - 599)
    rng = np.random.default_rng(0)
    assert cycle([0.1, 0.9], {1: young}, NOW, POLICY, rng) == []
    just_old_enough = RunningPod(999, 1, NOW - 600)  # minPodAge is inclusive
    pods = {1: [*young, just_old_enough]}
    assert cycle([0.1, 0.9], pods, NOW, POLICY, rng) == [just_old_enough]


def test_the_loop_removes_hot_node_minutes_and_is_idle_without_drift():
    # Seed 3 of an hour of the benchmark's first row: 125 hot node-minutes without the loop.
    drift = DriftScenario(pod_median=40e6, duration=3600.0)
    without, with_loop = simulate(drift, None, 3), simulate(drift, POLICY, 3)
    assert without.hot_node_minutes > 60 and with_loop.evictions > 0
    assert with_loop.hot_node_minutes < without.hot_node_minutes / 2
    assert with_loop.most_evictions_per_node_in_a_cycle == 1
    calm = simulate(
        DriftScenario(nodes=30, pods_per_node=6, drift_share=0.0, duration=1800.0), POLICY, 3
    )
    assert calm.evictions == 0 and calm.hot_node_minutes == 0
