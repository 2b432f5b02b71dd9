"""The rebalance plan and the descheduler's eviction rules, each on a
hand-computed case (the rules cite their descheduler source in
eviction_rules.py and rebalancing/plan.py)."""

from kubectl_nettraffic.rebalancing.eviction_rules import (
    EvictionPolicy,
    PodFacts,
    eviction_order,
    not_evictable,
    pod_facts,
)
from kubectl_nettraffic.rebalancing.low_node_utilization import Thresholds
from kubectl_nettraffic.rebalancing.plan import NodeLoad, PodLoad, plan_rebalance

POLICY = EvictionPolicy(frozenset({"kube-system", "nettraffic"}), min_pod_age=600)
OLD = 3600.0


def facts(name: str, node: str = "hot", owner=("ReplicaSet", "rs"), priority=None,
          qos="Burstable", age=OLD, namespace="shop", **extra) -> PodFacts:  # fmt: skip
    return PodFacts(namespace, name, node, owner, priority, qos, age,
                    extra.get("local_storage", False), extra.get("mirror", False),
                    extra.get("prefer_no_eviction", False))  # fmt: skip


def cluster() -> tuple[list[NodeLoad], list[PodLoad]]:
    """hot 90% (900 of 1,000 B/s received); mid 50%; cool 10%; spare idle,
    its speed unknown (measured against the slowest known, 1,000 B/s)."""
    nodes = [
        NodeLoad("hot", 900.0, 100.0, 1000.0, True),
        NodeLoad("mid", 500.0, 0.0, 1000.0, True),
        NodeLoad("cool", 100.0, 0.0, 1000.0, True),
        NodeLoad("spare", 0.0, 0.0, None, True),
    ]
    pods = [
        PodLoad(facts("a", owner=("ReplicaSet", "a"), qos="BestEffort"), 300.0, 10.0),
        PodLoad(facts("a-2", node="mid", owner=("ReplicaSet", "a")), 100.0, 0.0),
        PodLoad(facts("b", owner=("ReplicaSet", "b"), priority=100, qos="Guaranteed"), 200.0, 0.0),
        PodLoad(facts("b-2", node="cool", owner=("ReplicaSet", "b")), 0.0, 0.0),
        PodLoad(facts("c", owner=("DaemonSet", "agent")), 250.0, 0.0),
        PodLoad(facts("d", owner=("ReplicaSet", "a"), age=60.0), 100.0, 0.0),
    ]
    return nodes, pods


def test_one_eviction_brings_the_node_under_its_threshold():
    nodes, pods = cluster()
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80))
    assert plan.note is None and plan.cycles == 1 and plan.destinations == 2
    (hot,) = plan.nodes
    # a (300 B/s) leaves: 900 - 300 = 600 of 1,000. It goes where it fills a
    # link least: spare (0 + 300 = 30%) over cool (40%) and mid (80%).
    assert (hot.name, hot.utilization, hot.after) == ("hot", 0.9, 0.6)
    steps = {s.pod.facts.name: s for s in hot.pods}
    assert (steps["a"].order, steps["a"].cycle, steps["a"].moves_to) == (1, 1, "spare")
    assert steps["b"].order is None and steps["b"].not_evictable is None  # not needed
    assert steps["c"].not_evictable == "DaemonSet pod"
    assert steps["d"].not_evictable == "younger than minPodAge (600s)"
    # The table lists them in the order the policy tries them.
    assert [s.pod.facts.name for s in hot.pods] == ["a", "c", "d", "b"]


def test_one_eviction_per_node_per_cycle_until_under():
    nodes, pods = cluster()
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 50))
    (hot,) = plan.nodes
    steps = {s.pod.facts.name: s for s in hot.pods}
    # Cycle 1: a to spare (60% left). Cycle 2: b (200 B/s) to cool
    # (100 + 200 = 30%; spare would be 300 + 200 = 50%): 40% left.
    assert plan.cycles == 2
    assert (steps["b"].order, steps["b"].cycle, steps["b"].moves_to) == (2, 2, "cool")
    assert hot.after == 0.4


def test_nothing_moves_without_a_node_under_the_low_threshold():
    nodes, pods = cluster()
    plan = plan_rebalance(nodes[:3], pods, POLICY, Thresholds(9, 80))  # cool is at 10%
    assert plan.cycles == 0 and plan.nodes[0].after == 0.9
    assert plan.note == "no node is at or below 9% to take pods: the descheduler evicts nothing"
    assert plan_rebalance(nodes[:3], pods, POLICY, Thresholds(10, 80)).cycles == 1


def test_utilisation_is_read_in_whole_percent():
    nodes, pods = cluster()
    nodes[0] = NodeLoad("hot", 809.9, 0.0, 1000.0, True)  # 80.99%: read as 80, not above 80
    assert plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80)).nodes == ()


def test_no_node_over_the_threshold():
    nodes, pods = cluster()
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 95))
    assert (plan.nodes, plan.cycles, plan.note) == ((), 0, "no node is above 95%")


def test_eviction_order_priority_then_qos():
    pods = [
        facts("guaranteed-none", qos="Guaranteed"),
        facts("p10-besteffort", priority=10, qos="BestEffort"),
        facts("p0-guaranteed", priority=0, qos="Guaranteed"),
        facts("p0-burstable", priority=0, qos="Burstable"),
        facts("besteffort-none", qos="BestEffort"),
    ]
    assert [p.name for p in eviction_order(pods)] == [
        "besteffort-none",  # no priority first; BestEffort before Guaranteed
        "guaranteed-none",
        "p0-burstable",
        "p0-guaranteed",
        "p10-besteffort",
    ]


def test_protections():
    owners = {("shop", "ReplicaSet", "rs"): 3, ("shop", "ReplicaSet", "one"): 1}
    cases = {
        "namespace kube-system is not evictable": facts("x", namespace="kube-system"),
        "static pod": facts("x", mirror=True),
        "no owner (a bare pod is not recreated)": facts("x", owner=None),
        "system-critical priority": facts("x", priority=2000001000),
        "local storage (emptyDir or hostPath)": facts("x", local_storage=True),
        "ReplicaSet/one has 1 pod(s), under minReplicas 2": facts("x", owner=("ReplicaSet", "one")),
    }
    for reason, pod in cases.items():
        assert not_evictable(pod, POLICY, owners) == reason
    assert not_evictable(facts("x"), POLICY, owners) is None


def test_pod_facts_from_the_api_object():
    pod = {
        "metadata": {
            "name": "web-1", "namespace": "shop", "creationTimestamp": "2026-01-01T00:00:00Z",
            "ownerReferences": [{"kind": "ReplicaSet", "name": "web-7d", "controller": True}],
        },
        "spec": {"nodeName": "n1", "priority": 5, "volumes": [{"name": "tmp", "emptyDir": {}}]},
        "status": {"qosClass": "Guaranteed"},
    }  # fmt: skip
    got = pod_facts(pod, now=1767225600.0 + 90)
    assert got == PodFacts("shop", "web-1", "n1", ("ReplicaSet", "web-7d"), 5, "Guaranteed",
                           90.0, True, False)  # fmt: skip


def test_several_hot_nodes_are_relieved_busiest_first_in_each_cycle():
    """Two hot nodes, listed quietest first; two destinations. The busiest
    (95%) goes first: its pod (300 B/s) takes cool (0 + 30% over mid's 25 +
    30%); then hot-b's (200 B/s) finds cool at 30 + 20 = 50% and mid at
    25 + 20 = 45%: mid. Taken in the listed order, both would go to cool."""
    nodes = [
        NodeLoad("hot-b", 850.0, 0.0, 1000.0, True),
        NodeLoad("hot-a", 950.0, 0.0, 1000.0, True),
        NodeLoad("mid", 250.0, 0.0, 1000.0, True),
        NodeLoad("cool", 0.0, 0.0, 1000.0, True),
    ]
    pods = [
        PodLoad(facts("b", node="hot-b", owner=("ReplicaSet", "b")), 200.0, 0.0),
        PodLoad(facts("a", node="hot-a", owner=("ReplicaSet", "a")), 300.0, 0.0),
        # their siblings, idle, so that neither is its owner's last replica
        PodLoad(facts("b-2", node="mid", owner=("ReplicaSet", "b")), 0.0, 0.0),
        PodLoad(facts("a-2", node="mid", owner=("ReplicaSet", "a")), 0.0, 0.0),
    ]
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80))
    assert [n.name for n in plan.nodes] == ["hot-a", "hot-b"]
    assert plan.cycles == 1 and plan.destinations == 2
    moved = {s.pod.facts.name: (s.cycle, s.moves_to) for n in plan.nodes for s in n.pods}
    assert moved == {"a": (1, "cool"), "b": (1, "mid")}
    assert [n.after for n in plan.nodes] == [0.65, 0.65]


def test_evictions_per_node_go_in_one_cycle_without_measuring_between():
    """evictionLimits.node 2: hot (90%) loses the first two evictable pods
    in order, a and b, in cycle 1, although a alone brings it to 60%."""
    nodes, pods = cluster()
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80, evictions_per_node=2))
    (hot,) = plan.nodes
    steps = {s.pod.facts.name: s for s in hot.pods}
    assert plan.cycles == 1
    assert (steps["a"].cycle, steps["b"].cycle) == (1, 1)
    # a to spare (30%), then b (200 B/s) to cool (10 + 20 = 30%, spare 50%).
    assert (steps["a"].moves_to, steps["b"].moves_to) == ("spare", "cool")
    assert hot.after == 0.4


def test_a_node_without_a_sample_skips_the_cycle():
    nodes, pods = cluster()
    nodes.append(NodeLoad("new", None, None, 1000.0, True))  # no traffic series yet
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80))
    assert plan.cycles == 0 and plan.nodes[0].after == 0.9
    assert plan.note == "no sample for node new: the descheduler skips the cycle"
    # Not Ready, it is not listed, so its missing sample does not matter.
    nodes[-1] = NodeLoad("new", None, None, 1000.0, True, ready=False)
    assert plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80)).cycles == 1


def test_a_not_ready_hot_node_is_not_planned_and_a_cordoned_one_takes_nothing():
    nodes, pods = cluster()
    nodes[0] = NodeLoad("hot", 900.0, 100.0, 1000.0, True, ready=False)
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80))
    assert (plan.nodes, plan.note) == ((), "no node is above 80%")
    nodes, pods = cluster()
    # cool and spare cordoned: no node can take pods (mid at 50% is over 40).
    nodes[2] = NodeLoad("cool", 100.0, 0.0, 1000.0, True, schedulable=False)
    nodes[3] = NodeLoad("spare", 0.0, 0.0, None, True, schedulable=False)
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80))
    assert plan.cycles == 0 and plan.destinations == 0


def test_a_reading_equal_to_a_threshold_compares_as_upstream_computes_it():
    """The descheduler compares float64(n)/100*100: 56 becomes
    56.00000000000001, so a node reading 56 is over a target threshold of 56
    and not under a low threshold of 56; 57 becomes 56.99999999999999, so
    57 is under 57 and not over it, as the integers would say."""
    from kubectl_nettraffic.rebalancing.low_node_utilization import is_over, is_under

    assert is_over(56, 56) and not is_under(56, 56)
    assert not is_over(57, 57) and is_under(57, 57)
    assert not is_over(75, 75) and is_under(50, 50)
    nodes, pods = cluster()
    nodes[0] = NodeLoad("hot", 560.0, 0.0, 1000.0, True)  # reads 56
    assert [n.name for n in plan_rebalance(nodes, pods, POLICY, Thresholds(40, 56)).nodes] == [
        "hot"
    ]
    assert plan_rebalance(nodes, pods, POLICY, Thresholds(40, 57)).nodes == ()


def test_prefer_no_eviction_goes_after_its_peers():
    """Same priority and QoS: the annotated pod goes last, whatever the
    order given; a lower priority still goes first (SortPodsBasedOnPriorityLowToHigh)."""
    pods = [
        facts("marked", prefer_no_eviction=True),
        facts("plain"),
        facts("marked-low", priority=0, prefer_no_eviction=True),
        facts("plain-low", priority=0),
        facts("marked-besteffort", qos="BestEffort", prefer_no_eviction=True),
    ]
    assert [p.name for p in eviction_order(pods)] == [
        "marked-besteffort",  # no priority, BestEffort: before any Burstable
        "plain",
        "marked",
        "plain-low",
        "marked-low",
    ]
    marked = pod_facts(
        {
            "metadata": {
                "name": "x",
                "annotations": {"descheduler.alpha.kubernetes.io/prefer-no-eviction": ""},
            }
        },
        now=0.0,
    )
    assert marked.prefer_no_eviction  # present with any value, even empty


def test_the_heavier_pod_goes_first_when_the_light_one_is_marked():
    nodes, pods = cluster()
    # b (200 B/s, priority 100) and a sibling e (50 B/s) of the same priority
    # and QoS, e listed first: unmarked, e would go first.
    pods = [p for p in pods if p.facts.name not in ("a", "d")]
    e = facts(
        "e", owner=("ReplicaSet", "b"), priority=100, qos="Guaranteed", prefer_no_eviction=True
    )
    pods.insert(0, PodLoad(e, 50.0, 0.0))
    nodes[0] = NodeLoad("hot", 850.0, 0.0, 1000.0, True)
    plan = plan_rebalance(nodes, pods, POLICY, Thresholds(40, 80))
    steps = {s.pod.facts.name: s for s in plan.nodes[0].pods}
    assert steps["b"].order == 1 and steps["e"].order is None
