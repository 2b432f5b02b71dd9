"""The placement benchmark's parts: the kube-scheduler scoring model follows
the plugins' rules, and the simulation (real engine) separates the strategies."""

import itertools

import numpy as np
import pytest

from bench.peer_simulation import own_constraints, spread_group
from bench.placement_scenarios import Scenario
from bench.placement_simulation import STRATEGIES, simulate
from bench.placement_summary import summarise
from bench.scheduler_model import (
    MAX_SKEW_HOSTNAME,
    MAX_SKEW_ZONE,
    ClusterState,
    KubeScheduler,
    balanced_allocation_scores,
    default_normalize_score,
    least_allocated_scores,
    node_affinity_scores,
    topology_spread_scores,
    zone_skew_allows,
)
from harness.reviews import pod
from kubectl_nettraffic.scoring.scheduler_sample import num_feasible_nodes_to_find
from kubectl_nettraffic.scoring.spread import SpreadRules


def _state(n: int = 4, cpu_used: float = 0.0, memory_used: float = 0.0) -> ClusterState:
    return ClusterState(
        np.full(n, 16.0),
        np.full(n, 64.0),
        np.full(n, cpu_used),
        np.full(n, memory_used),
        np.arange(n) % 2,
    )


@pytest.mark.parametrize(
    ("nodes", "percentage", "found"),
    [
        (50, 0, 50),  # below 100: every node
        (99, 0, 99),
        (100, 0, 100),  # 50% of 100 is 50, never fewer than 100
        (500, 0, 230),  # 50 - 500/125 = 46%
        (5_000, 0, 500),  # 50 - 40 = 10%
        (20_000, 0, 1_000),  # 50 - 160 < 5: 5%
        (1_000, 30, 300),  # a configured percentageOfNodesToScore
    ],
)
def test_num_feasible_nodes_to_find(nodes, percentage, found):
    assert num_feasible_nodes_to_find(nodes, percentage) == found


def test_default_normalize_score_is_integer_scaling_by_the_maximum():
    assert list(default_normalize_score(np.array([3, 7]))) == [42, 100]  # 300 // 7
    assert list(default_normalize_score(np.array([3, 7]), reverse=True)) == [58, 0]
    assert list(default_normalize_score(np.array([0, 0]))) == [0, 0]
    assert list(default_normalize_score(np.array([0, 0]), reverse=True)) == [100, 100]


def test_node_affinity_is_normalised_over_the_scored_nodes_only():
    scored = np.array([0, 2, 3])
    assert list(node_affinity_scores({0: 30, 1: 100, 2: 60}, scored)) == [50, 100, 0]
    assert list(node_affinity_scores({}, scored)) == [0, 0, 0]


def test_topology_spread_by_hand():
    state = _state()
    state.replicas["web"] = np.array([0.0, 1.0, 2.0, 0.0])
    # hostname weight ln(4 + 2), zone weight ln(2 + 2); zone 0 holds 2 replicas, zone 1 holds 1:
    # raw 0+2+2*1.386+4 = 8.77 -> 9; 1.79+2+1.386+4 = 9.18 -> 9; 3.58+2+2.77+4 = 12.36 -> 12;
    # 0+2+1.386+4 = 7.39 -> 7. Then 100 * (12 + 7 - s) // 12.
    assert list(topology_spread_scores(state, "web", np.arange(4))) == [83, 83, 58, 100]
    assert list(topology_spread_scores(state, "other", np.arange(4))) == [100] * 4


def test_topology_spread_weighs_hostnames_by_the_scored_nodes_and_zones_by_all_their_nodes():
    state = _state()
    state.replicas["web"] = np.array([0.0, 0.0, 4.0, 3.0])
    # Scored: nodes 0 and 1. Hostname weight ln(2 + 2); node 0's zone (0) holds node 2's 4
    # replicas, node 1's zone (1) node 3's 3, with zone weight ln(2 + 2):
    # raw 2 + 4 * 1.386 + 4 = 11.55 -> 12 and 2 + 3 * 1.386 + 4 = 10.16 -> 10.
    assert list(topology_spread_scores(state, "web", np.array([0, 1]))) == [83, 100]


def test_topology_spread_of_pods_with_a_hostname_constraint_alone_ignores_zones():
    state = _state()
    state.replicas["web"] = np.array([0.0, 0.0, 4.0, 3.0])
    # As above, without the zone term: both scored nodes hold none, raw 2 -> 2 each.
    scores = topology_spread_scores(state, "web", np.array([0, 1]), zone_spread=False)
    assert list(scores) == [100, 100]


@pytest.mark.parametrize(
    ("zone_spread", "zone_max_skew", "read"),
    [
        (True, None, SpreadRules(5, 3, defaults=True, per_template=True)),  # none: the defaults
        (False, None, SpreadRules(None, 3)),  # per hostname alone
        (False, 1, SpreadRules(1, 3)),  # and per zone, DoNotSchedule
    ],
)
def test_bench_peers_pods_carry_the_constraints_its_scheduler_spreads_them_by(
    zone_spread, zone_max_skew, read
):
    scheduler = KubeScheduler(
        _state(), np.random.default_rng(0), zone_spread=zone_spread, zone_max_skew=zone_max_skew
    )
    admitted = pod()
    constraints = own_constraints(scheduler)
    if constraints is not None:
        admitted["spec"]["topologySpreadConstraints"] = constraints
    assert SpreadRules.of(admitted, MAX_SKEW_ZONE, MAX_SKEW_HOSTNAME) == read
    # The model counts the pods the product counts: a ReplicaSet's alone
    # under the defaults, every ReplicaSet's of the workload under their own.
    owner = "web-00000a"
    assert spread_group(scheduler, owner, "web") == (owner if read.per_template else "web")


def test_a_zone_constraint_that_must_hold_filters_the_fuller_zones():
    state = _state(6)  # zones 0, 1, 0, 1, 0, 1
    assert zone_skew_allows(state, "web", 1).all()  # no pod yet
    state.bind(0, "web", 0.1, 0.1)  # zone 0: 1, zone 1: 0
    np.testing.assert_array_equal(zone_skew_allows(state, "web", 1), [0, 1, 0, 1, 0, 1])
    assert zone_skew_allows(state, "web", 2).all()
    scheduler = KubeScheduler(state, np.random.default_rng(0), zone_max_skew=1)
    # However strongly a node of zone 0 is preferred, the pod goes to zone 1.
    assert scheduler.schedule("web", 0.1, 0.1, {2: 100}) % 2 == 1


def test_least_allocated_by_hand():
    state = _state(1, cpu_used=6.0, memory_used=20.0)
    # cpu (16000 - 6500) * 100 // 16000 = 59; memory (64 - 21) GiB * 100 // 64 GiB = 67
    assert list(least_allocated_scores(state, np.array([0]), 0.5, 1.0)) == [(59 + 67) // 2]


def test_balanced_allocation_both_rules_by_hand():
    state = _state(1, cpu_used=6.0, memory_used=20.0)
    # After: cpu 6.5/16 = 0.40625, memory 21/64 = 0.328125, std 0.0390625.
    assert list(balanced_allocation_scores(state, np.array([0]), 0.5, 1.0, "v1.35")) == [96]
    # Before: 6/16 = 0.375, 20/64 = 0.3125, std 0.03125: 0.75 + (0.03125 - 0.0390625) / 2.
    assert list(balanced_allocation_scores(state, np.array([0]), 0.5, 1.0, "v1.36")) == [74]
    balanced = _state(1, cpu_used=4.0, memory_used=16.0)  # 25% of both
    unchanged = balanced_allocation_scores(balanced, np.array([0]), 1.0, 4.0, "v1.36")
    assert list(unchanged) == [75]  # no change in balance


def test_filtering_samples_and_rotates_like_kube_scheduler():
    scheduler = KubeScheduler(_state(500), np.random.default_rng(0))
    first = scheduler.feasible_sample(0.5, 1.0)
    assert list(first) == list(range(230)) and scheduler.next_start_node_index == 230
    second = scheduler.feasible_sample(0.5, 1.0)
    assert list(second) == list(range(230, 460))
    third = scheduler.feasible_sample(0.5, 1.0)
    assert list(third) == [*range(460, 500), *range(0, 190)]
    assert scheduler.next_start_node_index == 190


def test_the_walk_counts_the_nodes_that_failed_the_filter():
    state = _state(500)
    state.cpu_requested[:100] = 16.0  # the first 100 nodes are full
    scheduler = KubeScheduler(state, np.random.default_rng(0))
    assert list(scheduler.feasible_sample(0.5, 1.0)) == list(range(100, 330))
    assert scheduler.next_start_node_index == 330


def test_a_preference_outside_the_sample_is_not_seen():
    scheduler = KubeScheduler(_state(500), np.random.default_rng(0))
    chosen = scheduler.schedule("web", 0.5, 1.0, {499: 100})
    assert chosen is not None and chosen < 230
    scheduler.next_start_node_index = 300
    assert scheduler.schedule("web", 0.5, 1.0, {499: 100}) == 499


def test_no_feasible_node_leaves_the_pod_pending_and_one_is_taken_unscored():
    state = _state(4, cpu_used=16.0)
    scheduler = KubeScheduler(state, np.random.default_rng(0))
    assert scheduler.schedule("web", 0.5, 1.0, {0: 100}) is None
    assert state.memory_requested.sum() == 0  # nothing bound
    state.cpu_requested[2] = 0.0
    assert scheduler.schedule("web", 0.5, 1.0, {0: 100}) == 2


def test_schedule_follows_a_strong_preference_and_books_resources():
    state = _state()
    chosen = KubeScheduler(state, np.random.default_rng(0)).schedule("web", 1.0, 2.0, {3: 100})
    assert chosen == 3 and state.cpu_requested[3] == 1.0 and state.replicas["web"][3] == 1


def test_would_pick_is_where_schedule_binds_a_pod_without_terms_and_changes_nothing():
    # 500 nodes alike: every pick is a tie, drawn from the sample.
    scheduler = KubeScheduler(_state(500), np.random.default_rng(3))
    scheduler.schedule("web", 0.5, 1.0, {})
    start = scheduler.next_start_node_index
    would = scheduler.would_pick("web", 0.5, 1.0)
    assert scheduler.next_start_node_index == start
    assert scheduler.state.cpu_requested.sum() == 0.5  # nothing bound
    assert scheduler.schedule("web", 0.5, 1.0, {}) == would
    # A term on another node of the sample takes the pod there.
    would = scheduler.would_pick("web", 0.5, 1.0)
    first = scheduler.next_start_node_index  # the sample runs from here
    preferred = first if would != first else first + 1
    assert scheduler.schedule("web", 0.5, 1.0, {preferred: 100}) == preferred != would


def test_simulation_separates_the_strategies():
    scenario = Scenario("smoke", nodes=20, bursts=4)
    results = {strategy: summarise(scenario, strategy, [0, 1])[0] for strategy in STRATEGIES}
    assert results["oracle"].hot_share == 0
    assert results["nettraffic"].hot_share <= results["default"].hot_share
    assert results["nettraffic"].hot_share <= results["tutorial"].hot_share
    assert results["nettraffic"].max_utilisation <= results["tutorial"].max_utilisation


def test_pods_running_before_the_install_are_placed_alike_and_not_counted():
    before = Scenario("running", nodes=20, bursts=0, workloads=3, running_bursts=2)
    after = Scenario("running", nodes=20, bursts=2, workloads=3, running_bursts=2)
    oracle = simulate(before, "oracle", 0)[1]
    for strategy in STRATEGIES:
        run, utilisation = simulate(before, strategy, 0)
        assert not run.placements and run.hot == 0 and run.steered == 0
        np.testing.assert_allclose(utilisation, oracle)
        run = simulate(after, strategy, 0)[0]
        assert len(run.burst_sizes) == 2
        assert len(run.placements) + run.pending == sum(run.burst_sizes)


def test_a_row_meets_the_goals_by_its_figures_alone():
    """No row is exempt: where the oracle places pods hot, a row may place
    0.2 points more than it; past a second of binding delay, a row is only
    reported."""
    from bench.placement_tables import HeavyRow, heavy_table_rows, meets_goals

    assert meets_goals(0.005, 0.02, 0.0)
    assert not meets_goals(0.0051, 0.0, 0.0)  # hot: 0.5% at most
    assert not meets_goals(0.0, 0.0201, 0.0)  # busiest link: 2 points at most
    assert meets_goals(0.008, 0.0, 0.006)  # the oracle's 0.6% + 0.2 points
    assert not meets_goals(0.0081, 0.0, 0.006)

    def row(delay, hot, gap, oracle_hot=0.0):
        return HeavyRow("heavy", 1, delay, hot, None, gap, oracle_hot, None, 0.001, 0.002)

    rows = [
        row(0.0, 0.004, 0.01),
        row(0.5, 0.004, 0.03),
        row(1.0, 0.01, 0.0, 0.009),
        row(2.0, 0.02, 0.05),
    ]
    verdicts = [line.rsplit("|", 2)[1].strip() for line in heavy_table_rows(rows, 1.0)]
    assert verdicts == ["yes", "no", "yes", "no goal (no)"]


def test_the_worst_sliding_minute_of_query_time():
    """bench.learning's budget check: the most query time in any 60 s,
    windows anywhere, not only in fixed minute buckets."""
    from bench.learning import worst_sliding_minute

    # 1 s at 50 s and 1 s at 70 s: 1 s in each fixed minute from 0, 2 s in [50, 110).
    rounds = [("slice", 50.0, 1.0), ("slice", 70.0, 1.0), ("young", 200.0, 0.5)]
    assert worst_sliding_minute(rounds, 0.0, 300.0) == 2.0
    # a round cut by the window's start counts in part
    assert worst_sliding_minute([("slice", 9.0, 2.0)], 10.0, 100.0) == 1.0


def test_a_scale_up_is_admitted_in_slow_start_batches_and_bound_in_order():
    from bench.control_plane import CONTROLLER_BURST, CONTROLLER_QPS, SCHEDULER_QPS, scale_up

    times = scale_up(40, 10.0, 0.5, np.random.default_rng(0), np.random.default_rng(1))
    admitted = [t.admitted for t in times]
    # Batches of 1, 2, 4, 8, 16 and the 9 left: each starts when the last
    # create of the one before has returned.
    batches = [1, 2, 4, 8, 16, 9]
    first = 0
    for before, size in itertools.pairwise(batches):
        ended = max(t.created for t in times[first : first + before])
        first += before
        assert min(admitted[first : first + size]) >= ended
    # The client's token bucket: at most 30 at once, then 20 a second; 40
    # creates take at least half a second.
    ordered = sorted(admitted)
    for i, start in enumerate(ordered):
        for j in range(i, len(ordered)):
            assert j - i + 1 <= CONTROLLER_BURST + CONTROLLER_QPS * (ordered[j] - start) + 1e-6
    assert ordered[-1] - ordered[0] >= (40 - CONTROLLER_BURST) / CONTROLLER_QPS - 1e-6
    # Bound in admission order, at most 50 a second, never before stored.
    bound = [t.bound for t in times]
    assert all(b - a >= 1 / SCHEDULER_QPS - 1e-9 for a, b in itertools.pairwise(bound))
    assert all(t.bound >= t.created >= t.admitted for t in times)
    # Most of the burst is admitted before the first binding shows.
    assert sum(a < bound[0] for a in admitted) > len(times) / 2
    # At once: the same slow-start admissions, each bound the instant it is admitted.
    at_once = scale_up(40, 10.0, 0.0, np.random.default_rng(0), np.random.default_rng(1))
    assert [t.admitted for t in at_once] == admitted
    assert all(t.admitted == t.created == t.bound for t in at_once)


def test_scale_ups_at_any_binding_delay_admit_alike_burst_after_burst():
    """The binding delays come from a stream of their own: a run's later
    bursts are admitted at the same times whatever the delay, so rows that
    differ only by it compare the delay, not another draw of the timing."""
    from bench.control_plane import scale_up

    def admissions(delay: float) -> list[float]:
        timing, delays = np.random.default_rng(7), np.random.default_rng(8)
        bursts = [scale_up(25, start, delay, timing, delays) for start in (10.0, 40.0, 70.0)]
        return [t.admitted for burst in bursts for t in burst]

    assert admissions(0.0) == admissions(0.15) == admissions(1.0)


def test_standard_errors_of_the_heavy_rows():
    import math

    from bench.placement_tables import hot_share_error, paired_error

    # Seed by seed: the same gap every seed has no error, whatever the level.
    assert paired_error([0.9, 0.8, 1.0], [0.85, 0.75, 0.95]) == pytest.approx(0.0)
    # Gaps of 0.02 and 0.04: sd 0.01414, over sqrt(2).
    assert paired_error([0.92, 0.84], [0.9, 0.8]) == pytest.approx(0.01)
    assert math.isnan(paired_error([0.9], [0.8]))
    # Every seed hot at the same share: no error; one seed all the hot pods: some.
    assert hot_share_error([(1, 100), (2, 200), (3, 300)]) == pytest.approx(0.0)
    uneven = hot_share_error([(0, 100), (0, 100), (6, 100)])
    # Share 2%: residuals -2, -2, +4 pods; variance 12, over 3 seeds, per 100 pods.
    assert uneven == pytest.approx(math.sqrt(12 / 3) / 100)
    assert math.isnan(hot_share_error([(0, 0), (0, 0)]))


def test_the_published_command_reruns_the_drawn_seed():
    from bench.report import rerun_command

    assert rerun_command("bench.peers", ["--draws", "3"], None, 42) == (
        "python -m bench.peers --draws 3 --seed 42"
    )
    # A seed given is in the arguments already.
    assert rerun_command("bench.peers", ["--seed", "7"], 7, 7) == "python -m bench.peers --seed 7"
    assert rerun_command("bench.peers", [], None, 5) == "python -m bench.peers --seed 5"


def test_a_workload_s_spread_and_the_verdict_against_kube_scheduler_alone():
    import numpy as np

    from bench.scheduler_model import ClusterState
    from bench.workload_spread import SpreadSummary, spread_kept, workload_spreads

    state = ClusterState(
        cpu_allocatable=np.full(6, 16.0),
        memory_allocatable=np.full(6, 64.0),
        cpu_requested=np.zeros(6),
        memory_requested=np.zeros(6),
        zone=np.arange(6) % 3,  # nodes 0 and 3 in zone 0, ...
    )
    for node in (0, 0, 3, 1):  # zones 0: 3 pods, 1: 1, 2: none
        state.bind(node, "web", 0.1, 0.1)
    state.bind(2, "db", 0.1, 0.1)
    (db, web) = workload_spreads(state, ["web", "db", "gone"])
    assert (web.pods, web.zone_skew, web.most_on_node, web.zones_missing) == (4, 3, 2, 1)
    assert (db.pods, db.zone_skew, db.zones_missing) == (1, 1, 2)
    ours = SpreadSummary.of([web, db])
    assert (ours.zone_skew, ours.most_on_node, ours.lost_zone) == (2.0, 1.5, 1.0)
    alone = SpreadSummary(0.5, 0.0, 1.0, 0.0)
    assert not spread_kept(ours, alone, calm=False)  # web lost a zone (db is too small to count)
    assert spread_kept(SpreadSummary(1.0, 0.0, 1.4, 0.0), alone, calm=True)
    assert not spread_kept(SpreadSummary(1.1, 0.0, 1.0, 0.0), alone, calm=True)  # skew 0.6 over


def test_both_node_affinity_models_read_a_not_in_as_the_api_does():
    """A tier term outside a zone: kube-scheduler's NodeAffinity counts it on
    a node of that tier in another zone, or without the zone label (NotIn
    matches then: apimachinery pkg/labels/selector.go, Requirement.Matches)."""
    from bench.scheduler_model import node_affinity_terms
    from bench.simulated_cluster import scheduled_terms
    from harness.reviews import pod
    from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL
    from kubectl_nettraffic.kube.pods import PREFERRED
    from kubectl_nettraffic.scoring.tiers import TIER_LABEL

    term = {
        "weight": 60,
        "preference": {
            "matchExpressions": [
                {"key": TIER_LABEL, "operator": "In", "values": ["1"]},
                {"key": ZONE_COPY_LABEL, "operator": "NotIn", "values": ["zone-a"]},
            ]
        },
    }
    admitted = pod(spec={"affinity": {"nodeAffinity": {PREFERRED: [term]}}})
    labels = [
        {TIER_LABEL: "1", ZONE_COPY_LABEL: "zone-a"},
        {TIER_LABEL: "1", ZONE_COPY_LABEL: "zone-b"},
        {TIER_LABEL: "1"},
        {TIER_LABEL: "2", ZONE_COPY_LABEL: "zone-b"},
    ]
    assert list(node_affinity_terms(admitted, labels)[1]) == [0, 60, 60, 0]
    codes, zones = np.array([1, 1, 2]), np.array(["zone-a", "zone-b", "zone-b"])
    assert list(scheduled_terms(admitted, {}, codes, zones)[1]) == [0, 60, 0]
