"""The testbed's pure parts: its percentiles, verdicts, arrivals and the
scheduler stand-in's reading of preferred terms (hand-computed cases)."""

import math

from bench.testbed import results, run
from bench.testbed.cluster import preferred_weights
from bench.testbed.report import figures, verdicts
from bench.testbed.results import PolicyResult
from bench.testbed.stats import percentiles
from bench.testbed.workload import Mix

LOST = -1.0


def _pairs(*rtts: float) -> list[tuple[float, float]]:
    return [(float(i), rtt) for i, rtt in enumerate(rtts)]


def _result(policy: str, p99_ms: float, probe_ms: float, on_hot: int = 0, bulk: float = 1.0):
    latency = _pairs(*([0.0001] * 98 + [p99_ms / 1e3] * 2))
    return PolicyResult(
        policy,
        0.0,
        10.0,
        latency,
        _pairs(*([probe_ms / 1e3] * 100)),
        [("b", bulk * 20e6, 20e6)],
        0.0,
        {"latency": on_hot} if on_hot else {},
        [],
        0,
        0,
    )


# Modules, not names: pytest would try to collect classes named Test*.
def _run(*policies: PolicyResult, leftovers: tuple[str, ...] = ()) -> results.TestbedResult:
    return results.TestbedResult(run.TestbedSettings(), [], list(policies), list(leftovers), 0.1)


def test_a_lost_request_counts_as_infinitely_slow():
    assert percentiles(_pairs(0.001, 0.002, LOST, 0.003), (0.5,)) == [0.002]
    assert percentiles(_pairs(*([0.001] * 98 + [LOST] * 2)), (0.99,)) == [math.inf]
    assert math.isnan(percentiles([], (0.99,))[0])


def test_verdicts_follow_the_figures_and_can_fail():
    good = _run(
        _result("nettraffic", 0.5, 0.3),
        _result("default", 6.0, 0.3, on_hot=2),
        _result("oracle", 0.5, 0.3),
    )
    met = {v.goal.removeprefix("run 1: "): v.met for v in verdicts([good])}
    assert met["nettraffic's latency p99 within 2x of the idle link's"] is True
    assert all(value is True for value in met.values())

    bad = _run(
        _result("nettraffic", 0.7, 0.3),  # 2.3x the idle link's
        _result("default", 3.0, 0.3, on_hot=1),  # 4.3x ours
        _result("oracle", 0.5, 0.3, bulk=1.2),  # ours sent 83% of the oracle's
        leftovers=("ntb-n1",),
    )
    assert [v.met for v in verdicts([bad])] == [False, False, False, False]


def test_the_default_comparison_does_not_apply_without_a_latency_pod_on_a_hot_node():
    run = _run(_result("nettraffic", 0.5, 0.3), _result("default", 0.6, 0.3, on_hot=0))
    comparison = next(v for v in verdicts([run]) if "5x" in v.goal)
    assert comparison.met is None


def test_repeatability_is_the_spread_of_the_runs_p99():
    runs = [_run(_result("nettraffic", p99, 0.3)) for p99 in (1.0, 1.1, 1.25)]
    verdict = next(v for v in verdicts(runs) if "repeatable" in v.goal)
    assert verdict.met is False and "spread 25%" in verdict.figures
    assert verdict.figures.endswith("beside each 3.3x, 3.7x, 4.2x")
    runs = [_run(_result("nettraffic", p99, 0.3)) for p99 in (1.0, 1.1, 1.2)]
    assert next(v for v in verdicts(runs) if "repeatable" in v.goal).met is True


def test_figures_of_a_policy():
    f = figures(_result("default", 6.0, 0.3, on_hot=2, bulk=0.5))
    assert f.p99 == 0.006 and f.idle_link_p99 == 0.0003 and f.latency_on_hot == 2
    assert f.bulk_ratio == 0.5 and f.lost == 0.0
    assert f.latency_beside_bulk == 0


def test_latency_pods_beside_a_bulk_pod_are_those_sharing_its_node():
    def placed(pod: str, kind: str, node: str) -> results.Placed:
        return results.Placed(pod, pod, kind, node, [], "", 0.0)

    result = _result("nettraffic", 0.5, 0.3)
    result.placements = [
        placed("bulk-1", "bulk", "n1"),
        placed("bulk-2", "bulk", "n1"),
        placed("lat-1", "latency", "n1"),
        placed("lat-2", "latency", "n2"),
        placed("lat-3", "latency", "n3"),
        placed("exits", "exits", "n3"),
        placed("bulk-3", "bulk", "n3"),
    ]
    assert figures(result).latency_beside_bulk == 2  # lat-1 and lat-3


def test_preferred_terms_sum_as_node_affinity_scores_them():
    nodes = [
        {"metadata": {"name": "a", "labels": {"nettraffic.io/traffic-tier": "1"}}},
        {"metadata": {"name": "b", "labels": {"nettraffic.io/traffic-tier": "2"}}},
        {"metadata": {"name": "c", "labels": {}}},
    ]

    def name_is(node: str, weight: int):
        return {
            "weight": weight,
            "preference": {
                "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]
            },
        }

    def tier_is(tier: str, weight: int):
        return {
            "weight": weight,
            "preference": {
                "matchExpressions": [
                    {"key": "nettraffic.io/traffic-tier", "operator": "In", "values": [tier]}
                ]
            },
        }

    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        name_is("b", 100),
                        name_is("a", 70),
                        tier_is("1", 60),
                        tier_is("2", 40),
                        {"weight": 50, "preference": {}},  # an empty term matches nothing
                    ]
                }
            }
        }
    }
    assert preferred_weights(pod, nodes) == {0: 130, 1: 140}
    assert preferred_weights({"spec": {}}, nodes) == {}


def test_arrivals_are_the_same_for_a_seed_and_the_learned_workload_has_a_head_start():
    mix = Mix()
    first, again = mix.arrivals(7), mix.arrivals(7)
    assert [(a.at, a.workload) for a in first] == [(a.at, a.workload) for a in again]
    learned = [a for a in first if a.workload == "ingest-learned"]
    assert len(learned) == mix.bulk_per_workload + 1
    assert learned[0].at == -mix.learned_head_start
    assert all(0 <= a.at <= mix.spread for a in first if a not in learned[:1])
    assert sum(a.kind == "latency" for a in first) == mix.latency_pods
    annotated = [a for a in first if a.annotated]
    assert annotated and all(a.annotations for a in annotated)
