"""The per-workload bandwidth model: VPA's decaying histogram, its p90 plus
margin, and a pod's workload from its controller reference."""

import pytest

from harness.reviews import pod
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.errors import ConfigError
from kubectl_nettraffic.kube.workloads import Workload, pod_workload
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.workload_bandwidth import (
    GROWTH,
    BandwidthLearner,
    DecayingHistogram,
    bucket_of,
    bucket_top,
)

DAY = 24 * 3600.0
WEB = Workload("shop", "Deployment", "web")


def test_buckets_keep_a_value_within_five_percent():
    for value in (2e3, 1e5, 3.3e6, 1.25e9):
        top = bucket_top(bucket_of(value))
        assert value <= top < value * GROWTH


def test_the_percentile_is_the_bucket_top_where_the_weight_reaches_it():
    histogram = DecayingHistogram(DAY)
    for value in [1e6] * 9 + [1e8]:
        histogram.add(value, at=0.0)
    assert histogram.percentile(0.9) == pytest.approx(1e6, rel=0.05)
    assert histogram.percentile(0.95) == pytest.approx(1e8, rel=0.05)


def test_old_samples_weigh_half_per_half_life():
    histogram = DecayingHistogram(DAY)
    for _ in range(10):
        histogram.add(1e6, at=0.0)  # yesterday's 10 samples ...
    for _ in range(6):
        histogram.add(5e7, at=DAY)  # ... weigh as 5 of today's: 6 of 11 are today's
    assert histogram.percentile(0.5) == pytest.approx(5e7, rel=0.05)
    # A week on, the old ones are far below the new ones' weight.
    for _ in range(2):
        histogram.add(2e6, at=8 * DAY)
    assert histogram.percentile(0.5) == pytest.approx(2e6, rel=0.05)


def test_a_quiet_refresh_does_not_erase_what_was_learned():
    learner = BandwidthLearner()
    for minute in range(60):
        learner.observe(
            [PodSample("shop", f"web-{i}", 4e7, 1e7, WEB) for i in range(3)], minute * 60.0
        )
    learner.observe([PodSample("shop", f"web-{i}", 0.0, 0.0, WEB) for i in range(3)], 3600.0)
    figure = learner.learned(3600.0).workloads[WEB]
    assert figure == pytest.approx(5e7 * 1.15, rel=0.05)


def test_workloads_need_enough_samples_and_the_cluster_figure_covers_all_pods():
    learner = BandwidthLearner(min_samples=3)
    job = Workload("batch", "Job", "etl")
    learner.observe(
        [PodSample("shop", "web-1", 1e6, 1e6, WEB), PodSample("batch", "etl-1", 1e8, 0, job)], 0.0
    )
    learner.observe(
        [PodSample("shop", "web-1", 1e6, 1e6, WEB), PodSample("x", "bare", 1e3, 0, None)], 15.0
    )
    learned = learner.learned(15.0)
    assert learned.workloads == {}  # two samples of web, one of etl
    assert learned.cluster is not None  # four pod samples over the cluster
    learner.observe([PodSample("shop", "web-2", 1e6, 1e6, WEB)], 30.0)
    assert learner.learned(30.0).workloads[WEB] == pytest.approx(2e6 * 1.15, rel=0.05)


def test_the_cluster_figure_is_every_pod_s_mean_and_a_workload_s_its_p90_plus_margin():
    learner = BandwidthLearner(min_samples=1)
    learner.observe([PodSample("shop", f"web-{i}", 1e6, 0.0, WEB) for i in range(9)], 0.0)
    learner.observe([PodSample("batch", "etl-1", 1e8, 0.0, Workload("batch", "Job", "etl"))], 0.0)
    learned = learner.learned(0.0)
    assert learned.cluster == pytest.approx((9 * 1e6 + 1e8) / 10, rel=0.05)
    assert learned.workloads[WEB] == pytest.approx(1e6 * 1.15, rel=0.05)


def test_pods_of_unlearned_workloads_are_booked_at_what_young_pods_of_such_workloads_sent():
    learner = BandwidthLearner(min_samples=3)
    light = [Workload("shop", "Deployment", f"light-{i}") for i in range(4)]
    # Light workloads that ran before: old pods (no creation time).
    for at in (0.0, 15.0, 30.0):
        learner.observe([PodSample("shop", f"{w.name}-{at:.0f}", 2e7, 0.0, w) for w in light], at)
    assert learner.learned(30.0).cluster == pytest.approx(2e7, rel=0.05)  # every pod's mean
    # A new heavy workload: its young pods' samples while it is not learned.
    heavy = Workload("etl", "Deployment", "pull")
    learner.observe([PodSample("etl", f"pull-{i}", 1e8, 0.0, heavy, 40.0) for i in range(2)], 60.0)
    # Two such samples are not enough: still every pod's mean.
    assert learner.learned(60.0).cluster == pytest.approx((12 * 2e7 + 2 * 1e8) / 14, rel=0.05)
    young = [PodSample("etl", f"pull-{i}", 1e8, 0.0, heavy, 40.0) for i in range(2, 6)]
    learner.observe(young, 75.0)
    learned = learner.learned(75.0)
    assert learned.workloads[heavy] == pytest.approx(1e8 * 1.15, rel=0.05)
    # The first three samples of the heavy workload count, the rest came once it was learned.
    assert learned.cluster == pytest.approx(1e8, rel=0.05)
    assert learner.newcomer_histogram is not None and learner.newcomer_histogram.samples == 3
    # Young pods of a learned workload and old pods of a new one do not count.
    learner.observe([PodSample("shop", "light-0-new", 1e3, 0.0, light[0], 70.0)], 90.0)
    other = Workload("shop", "StatefulSet", "db")
    learner.observe([PodSample("shop", f"db-{i}", 1e3, 0.0, other) for i in range(3)], 90.0)
    assert learner.learned(90.0).cluster == pytest.approx(1e8, rel=0.05)


def test_the_direction_follows_prometheus_direction():
    sample = PodSample("shop", "web-1", 3e6, 1e6, WEB)
    assert BandwidthLearner(direction="both").bandwidth(sample) == 4e6
    assert BandwidthLearner(direction="receive").bandwidth(sample) == 3e6
    assert BandwidthLearner(direction="transmit").bandwidth(sample) == 1e6


def _ramping(learner: BandwidthLearner, sends: float, created: float, at: float) -> PodSample:
    """A pod's sample as rate() over the window shows it at ``at``: the share
    of the window it has sent for (the in-flight ledger's model)."""
    shown = min(1.0, max(0.0, (at - created - learner.pod_startup) / learner.window))
    return PodSample("shop", "web-1", sends * shown, 0.0, WEB, created)


def test_a_pod_that_sent_for_part_of_the_window_is_scaled_to_what_it_sends():
    learner = BandwidthLearner(window=120.0, pod_startup=10.0, min_samples=1)
    for at in (45.0, 60.0, 100.0, 129.0):  # sent for 35-119 s of the 120
        assert learner.sending(_ramping(learner, 8e7, 0.0, at), at) == pytest.approx(8e7)
    # Past the window: as measured. Without a creation time: as measured.
    assert learner.sending(_ramping(learner, 8e7, 0.0, 500.0), 500.0) == pytest.approx(8e7)
    assert learner.sending(PodSample("shop", "web-1", 2e7, 0.0, WEB), 45.0) == 2e7
    # Scaled samples make the figure a pod sending for a whole window makes.
    learner.observe([_ramping(learner, 8e7, 0.0, 50.0)], 50.0)
    assert learner.learned(50.0).workloads[WEB] == pytest.approx(8e7 * 1.15, rel=0.05)


def test_a_pod_that_sent_for_under_a_quarter_of_the_window_is_not_sampled_yet():
    learner = BandwidthLearner(window=120.0, pod_startup=10.0, min_samples=1)
    young = _ramping(learner, 8e7, 0.0, 35.0)  # 25 s of the 120
    assert learner.sending(young, 35.0) is None
    learner.observe([young], 35.0)
    assert learner.learned(35.0).workloads == {}
    assert learner.learned(35.0).cluster is None


def test_without_a_window_samples_are_taken_as_they_are():
    learner = BandwidthLearner(min_samples=1)
    sample = PodSample("shop", "web-1", 2e7, 0.0, WEB, 30.0)
    assert learner.sending(sample, 35.0) == 2e7


def test_the_learner_from_settings_scales_with_the_window_and_pod_startup():
    settings = settings_from_mapping(
        {"prometheus": {"url": "http://p", "window": "5m"}, "steering": {"podStartup": "20s"}}
    )
    learner = BandwidthLearner.for_settings(settings)
    assert (learner.window, learner.pod_startup) == (300.0, 20.0)
    assert learner.sending(PodSample("shop", "w", 1e6, 0.0, WEB, 0.0), 170.0) == pytest.approx(2e6)


@pytest.mark.parametrize(
    "kind, name, labels, expected",
    [
        ("ReplicaSet", "web-7d9c4b", {"pod-template-hash": "7d9c4b"}, ("Deployment", "web")),
        ("ReplicaSet", "web-7d9c4b", {}, ("ReplicaSet", "web-7d9c4b")),  # a bare ReplicaSet
        ("ReplicaSet", "web-7d9c4b", {"pod-template-hash": "other"}, ("ReplicaSet", "web-7d9c4b")),
        ("StatefulSet", "db", {}, ("StatefulSet", "db")),
        ("Job", "etl-28373", {}, ("Job", "etl-28373")),
    ],
)
def test_a_pod_s_workload_comes_from_its_controller(kind, name, labels, expected):
    admitted = pod(generate_name=f"{name}-", labels={"app": "x", **labels}, owner_kind=kind)
    admitted["metadata"]["ownerReferences"][0]["name"] = name
    assert pod_workload(admitted) == Workload("default", *expected)


def test_a_pod_without_a_controller_has_no_workload():
    assert pod_workload(pod(owner_kind=None)) is None
    orphan = pod()
    orphan["metadata"]["ownerReferences"][0]["controller"] = False
    assert pod_workload(orphan) is None


@pytest.mark.parametrize(
    ("share", "message"),
    [(0, "use above 0, up to 1"), (1.5, "use above 0, up to 1"), ("all", "is not a number")],
)
def test_a_prometheus_share_outside_0_to_1_is_refused_with_the_fix(share, message):
    with pytest.raises(ConfigError, match=f"learning.prometheusShare.*{message}"):
        settings_from_mapping({"learning": {"prometheusShare": share}})
