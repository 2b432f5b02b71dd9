"""One workload identity: for every kind of owner, the figure the learner
learns from the Prometheus series (cAdvisor's and kube-state-metrics', in
a real Prometheus) is the one a pod of that workload is booked at when it
is admitted, from nothing but what the API server sends in the review."""

import time

import pytest

from harness.prometheus import prometheus_with_history
from harness.reviews import pod
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.learning.workload_bandwidth import BandwidthLearner
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.steering.pod_bandwidth import expected_bandwidth
from tests.harness.kube_series import NONE, PodSeries, ReplicaSetSeries, kube_lines

END = float(int(time.time()) + 600)
DEFAULT = 1.0


# (the running pod's series, its ReplicaSet's owner if any, the workload
# learned, and a new pod of it as admission sees it: owner kind, owner name, labels)
CASES = {
    "Deployment": (
        PodSeries("shop", "web-7d9c4b8f6d-x2k9p", 30e6, 10e6, "ReplicaSet", "web-7d9c4b8f6d"),
        ReplicaSetSeries("shop", "web-7d9c4b8f6d", "web"),
        Workload("shop", "Deployment", "web"),
        # a rollout's new ReplicaSet, not in kube-state-metrics yet
        ("ReplicaSet", "web-5f6b7c9d8", {"app": "web", "pod-template-hash": "5f6b7c9d8"}),
    ),
    "Argo Rollout": (
        PodSeries("shop", "cart-6c8f9d7b5-q8r2t", 20e6, 5e6, "ReplicaSet", "cart-6c8f9d7b5"),
        ReplicaSetSeries("shop", "cart-6c8f9d7b5", "cart", "Rollout"),
        Workload("shop", "Rollout", "cart"),
        ("ReplicaSet", "cart-7d9f8c6b4", {"rollouts-pod-template-hash": "7d9f8c6b4"}),
    ),
    "bare ReplicaSet": (
        PodSeries("shop", "solo-h4j5k", 8e6, 1e6, "ReplicaSet", "solo"),
        ReplicaSetSeries("shop", "solo", NONE, NONE),
        Workload("shop", "ReplicaSet", "solo"),
        ("ReplicaSet", "solo", {"app": "solo"}),
    ),
    "StatefulSet": (
        PodSeries("shop", "db-0", 5e6, 40e6, "StatefulSet", "db"),
        None,
        Workload("shop", "StatefulSet", "db"),
        ("StatefulSet", "db", {"app": "db"}),
    ),
    "CronJob": (
        PodSeries("batch", "nightly-29412345-8xk2m", 70e6, 1e6, "Job", "nightly-29412345"),
        None,
        Workload("batch", "CronJob", "nightly"),
        # the next night's Job
        ("Job", "nightly-29413785", {"batch.kubernetes.io/job-name": "nightly-29413785"}),
    ),
    "bare Job": (
        PodSeries("batch", "migrate-v2-7hj3k", 3e6, 3e6, "Job", "migrate-v2"),
        None,
        Workload("batch", "Job", "migrate-v2"),
        ("Job", "migrate-v2", {"batch.kubernetes.io/job-name": "migrate-v2"}),
    ),
}


@pytest.fixture(scope="module")
def learned():
    series = [case[0] for case in CASES.values()] + [PodSeries("shop", "debug", 9e6, 9e6)]
    replicasets = [case[1] for case in CASES.values() if case[1] is not None]
    server = prometheus_with_history([], END, more=list(kube_lines(series, replicasets, END)))
    try:
        settings = settings_from_mapping(
            {"prometheus": {"url": server.url, "window": "2m"}, "learning": {"minSamples": 1}}
        )
        source = PodTrafficSource(
            PrometheusSource(settings.prometheus, clock=lambda: END), settings.learning
        )
        report = source.samples()  # the learner's own query
        assert report.missing == ()
        learner = BandwidthLearner.for_settings(settings)
        learner.observe(report.samples, END)
        yield learner.learned(END)
    finally:
        server.stop()


@pytest.mark.parametrize("case", CASES)
def test_the_figure_learned_is_the_one_booked_at_admission(learned, case):
    series, _, workload, (kind, name, labels) = CASES[case]
    assert learned.workloads[workload] > DEFAULT  # learned under that workload
    admitted = pod(
        generate_name=f"{name}-", namespace=series.namespace, labels=labels, owner_kind=kind
    )
    admitted["metadata"]["ownerReferences"][0]["name"] = name
    figure, source, _ = expected_bandwidth(admitted, learned, DEFAULT)
    assert (source, figure) == ("workload", learned.workloads[workload])


def test_a_pod_without_an_owner_is_learned_into_the_cluster_figure_only(learned):
    assert all(w.name != "debug" for w in learned.workloads)
    figure, source, _ = expected_bandwidth(pod(name="debug", owner_kind=None), learned, DEFAULT)
    assert (source, figure) == ("cluster", learned.cluster)
