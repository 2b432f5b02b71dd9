"""The descheduler's cycle as low_node_utilization.py models it (each rule
cites its descheduler source there), on hand-computed cases, and the
rebalancing simulation that runs it: the loop removes hot node-minutes that
drift creates, evicts nothing without drift and never more than
evictionLimits.node from a node in one cycle."""

from bench.rebalancing_simulation import DriftScenario, Loop, LoopPolicy, simulate
from kubectl_nettraffic.rebalancing.eviction_rules import EvictionPolicy, PodFacts, owner_counts
from kubectl_nettraffic.rebalancing.low_node_utilization import (
    NodeSample,
    Thresholds,
    classify,
    descheduler_ready,
    reading,
    victims,
)

DEFAULTS = Thresholds(50.0, 75.0)


def test_the_reading_is_whole_percent_truncated():
    assert [reading(u) for u in (0.0, 0.5, 0.809, 0.81, 1.0)] == [0, 50, 80, 81, 100]


def test_classification_at_or_below_low_over_high_busiest_first():
    samples = [NodeSample(f"n{i}", u) for i, u in enumerate((0.3, 0.85, 0.95, 0.5, 0.75, 0.51))]
    got = classify(samples, DEFAULTS)
    assert got.under == ("n0", "n3")  # 50 is at the low threshold: under
    assert got.over == ("n2", "n1")  # 75 is not above 75
    assert got.idle is None


def test_nothing_without_an_under_node_an_over_node_or_with_every_node_under():
    def idle(*samples: float) -> str | None:
        return classify([NodeSample(f"n{i}", u) for i, u in enumerate(samples)], DEFAULTS).idle

    assert (
        idle(0.6, 0.9) == "no node is at or below 50% to take pods: the descheduler evicts nothing"
    )
    assert idle(0.1, 0.7) == "no node is above 75%"
    assert idle(0.1, 0.2) == "no node is above 75%"
    cordoned = [NodeSample("a", 0.1, schedulable=False), NodeSample("b", 0.9)]
    assert classify(cordoned, DEFAULTS).under == ()


def test_missing_or_out_of_range_samples_skip_the_cycle_unless_the_node_is_not_ready():
    missing = [NodeSample("a", 0.1), NodeSample("b", 0.9), NodeSample("c", None)]
    assert (
        classify(missing, DEFAULTS).idle == "no sample for node c: the descheduler skips the cycle"
    )
    missing[2] = NodeSample("c", None, ready=False)
    assert classify(missing, DEFAULTS).idle is None
    above = [NodeSample("a", 0.1), NodeSample("b", 1.2)]
    assert (
        classify(above, DEFAULTS).idle
        == "node b's sample is outside 0..1: the descheduler skips the cycle"
    )


def test_readiness_as_the_descheduler_reads_it():
    def node(*conditions: tuple[str, str]) -> dict:
        return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}

    assert descheduler_ready(node(("Ready", "True")))
    assert not descheduler_ready(node(("Ready", "Unknown")))
    assert descheduler_ready(node())  # no Ready condition: kept (IsReady)
    assert descheduler_ready(node(("MemoryPressure", "True"), ("Ready", "True")))


def _pod(
    name: str, node: str, owner: str = "web", age: float = 3600.0, marked: bool = False
) -> PodFacts:
    return PodFacts(
        "shop", name, node, ("ReplicaSet", owner), None, "Burstable", age, False, False, marked
    )


def test_victims_the_first_evictable_pods_up_to_the_limit_in_order():
    pods = {
        "hot": [
            _pod("young", "hot", age=60),
            _pod("marked", "hot", marked=True),
            _pod("x", "hot"),
            _pod("y", "hot"),
        ],
        "warm": [_pod("z", "warm"), _pod("lonely", "warm", owner="single")],
    }
    owners = owner_counts([p for listed in pods.values() for p in listed])
    policy = EvictionPolicy(frozenset(), min_pod_age=600)
    got = victims(("hot", "warm"), pods, policy, owners, evictions_per_node=2)
    # young is under minPodAge; marked goes after its peers; lonely is its owner's only pod.
    assert {node: [p.name for p in chosen] for node, chosen in got.items()} == {
        "hot": ["x", "y"],
        "warm": ["z"],
    }


def test_the_loop_removes_hot_node_minutes_and_is_idle_without_drift():
    # Seed 3 of an hour of the benchmark's first row, its pods growing within
    # the hour: 125 hot node-minutes without the loop.
    drift = DriftScenario(pod_median=40e6, duration=3600.0, drift_between=(300.0, 3600.0))
    without, with_loop = simulate(drift, None, 3), simulate(drift, Loop(), 3)
    assert without.hot_node_minutes > 60 and with_loop.evictions > 0
    assert with_loop.hot_node_minutes < without.hot_node_minutes / 2
    assert with_loop.most_evictions_per_node_in_a_cycle == 1
    three = simulate(drift, Loop(LoopPolicy(Thresholds(50.0, 75.0, 3))), 3)
    assert 1 < three.most_evictions_per_node_in_a_cycle <= 3
    calm = simulate(
        DriftScenario(nodes=30, pods_per_node=6, drift_share=0.0, duration=1800.0), Loop(), 3
    )
    assert calm.evictions == 0 and calm.hot_node_minutes == 0
