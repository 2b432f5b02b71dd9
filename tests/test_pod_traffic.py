"""The learner's query against the real Prometheus, fed cAdvisor and
kube-state-metrics series shaped as the kubelet and kube-state-metrics
expose them: containerd and CRI-O label shapes, a hostNetwork pod, a
Deployment mid-rollout (two ReplicaSets), a StatefulSet, a Job, a bare pod,
a counter reset, and a pod on two interfaces."""

import time

import pytest

from harness.prometheus import PrometheusServer, prometheus_with_history
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.pod_slices import FINEST, PodSlice
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource, build_learner_query
from kubectl_nettraffic.learning.workload_bandwidth import BandwidthLearner
from kubectl_nettraffic.learning.young_workloads import owned_pods_from
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, kube_lines
from tests.test_prometheus_source import CountingSession

END = float(int(time.time()) // 60 * 60)
PODS = [
    PodSeries("shop", "web-7d9c4b-a1", 1e6, 3e6, "ReplicaSet", "web-7d9c4b"),
    PodSeries("shop", "web-5f6a7b-b2", 2e6, 2e6, "ReplicaSet", "web-5f6a7b", runtime="cri-o"),
    PodSeries("shop", "db-0", 5e6, 1e6, "StatefulSet", "db", interfaces=("eth0", "net1")),
    PodSeries("batch", "etl-x9", 40e6, 0.5e6, "Job", "etl", reset_at=40),
    PodSeries("shop", "debug", 1e3, 1e3),  # no owner
    PodSeries(
        "kube-system", "kube-proxy-n1", 90e6, 90e6, "DaemonSet", "kube-proxy", host_network=True
    ),
    # A ReplicaSet no Deployment owns.
    PodSeries("shop", "lone-rs-c3", 1e5, 1e5, "ReplicaSet", "lone-rs"),
    # Created 90 s ago; a pod of the same name in another namespace is not.
    PodSeries("shop", "api-6c8d9f-k2", 8e6, 8e6, "ReplicaSet", "api-6c8d9f", age=90),
    PodSeries("batch", "api-6c8d9f-k2", 1e3, 1e3, "ReplicaSet", "api-6c8d9f"),
    PodSeries("shop", "cfg.v2", 1e3, 1e3, age=60),  # a dot in the name, created 60 s ago
    # A Job created 60 s ago, dots in its name and its pod's.
    PodSeries("batch", "etl.v2-x7k2p", 2e6, 2e6, "Job", "etl.v2", age=60),
]
REPLICASETS = [
    ReplicaSetSeries("shop", "web-7d9c4b", "web"),
    ReplicaSetSeries("shop", "web-5f6a7b", "web"),
    ReplicaSetSeries("shop", "api-6c8d9f", "api"),
]


def _source(
    server: PrometheusServer, session=None, clock=time.monotonic, **learning
) -> PodTrafficSource:
    settings = settings_from_mapping(
        {"prometheus": {"url": server.url, "window": "2m"}, "learning": learning}
    )
    prometheus = PrometheusSource(settings.prometheus, session=session, clock=lambda: END)
    return PodTrafficSource(prometheus, settings.learning, clock)


@pytest.fixture(scope="module")
def prometheus():
    server = prometheus_with_history([], END, more=list(kube_lines(PODS, REPLICASETS, END)))
    yield server
    server.stop()


def test_every_pod_gets_its_rates_and_its_workload(prometheus):
    report = _source(prometheus).fetch()
    assert report.missing == ()
    by_pod = {s.pod: s for s in report.samples}
    assert set(by_pod) == {
        "web-7d9c4b-a1",
        "web-5f6a7b-b2",
        "db-0",
        "etl-x9",
        "debug",
        "lone-rs-c3",
        "api-6c8d9f-k2",
        "cfg.v2",
        "etl.v2-x7k2p",
    }
    assert report.host_network_pods == 1  # kube-proxy's series are the node's interfaces
    # Both ReplicaSets of the rollout roll up to the Deployment, whichever runtime.
    assert by_pod["web-7d9c4b-a1"].workload == Workload("shop", "Deployment", "web")
    assert by_pod["web-5f6a7b-b2"].workload == Workload("shop", "Deployment", "web")
    assert by_pod["web-7d9c4b-a1"].receive == pytest.approx(1e6, rel=1e-3)
    assert by_pod["web-7d9c4b-a1"].transmit == pytest.approx(3e6, rel=1e-3)
    assert by_pod["web-5f6a7b-b2"].receive == pytest.approx(2e6, rel=1e-3)  # container="POD"
    assert by_pod["db-0"].workload == Workload("shop", "StatefulSet", "db")
    assert by_pod["db-0"].receive == pytest.approx(5e6, rel=1e-3)  # both interfaces summed
    assert by_pod["etl-x9"].workload == Workload("batch", "Job", "etl")
    # The counter restarted 40 s ago: rate() carries on across the reset.
    # (rate() counts from zero at the reset: the few seconds before it are lost.)
    assert by_pod["etl-x9"].receive == pytest.approx(40e6, rel=0.05)
    assert by_pod["debug"].workload is None
    assert by_pod["lone-rs-c3"].workload == Workload("shop", "ReplicaSet", "lone-rs")


def test_renamed_labels_and_metrics_are_configurable(prometheus):
    # A cluster whose kube-state-metrics scrape keeps other names: nothing matches them here.
    report = _source(prometheus, podOwnerMetric="ksm_kube_pod_owner").fetch()
    assert report.missing == ("kube-state-metrics",) and report.samples == ()
    report = _source(prometheus, receiveMetric="nope_rx", transmitMetric="nope_tx").fetch()
    assert report.missing == ("cadvisor",)


def test_one_query_per_fetch(prometheus):
    session = CountingSession()
    _source(prometheus, session=session).fetch()
    assert session.calls == 1


def test_the_learner_s_query_joins_in_prometheus(prometheus):
    source = _source(prometheus)
    report = source.samples()
    by_pod = {(s.namespace, s.pod): s for s in report.samples}
    # The same pods and workloads as the detailed query, one series each
    # (keyed by namespace too: two namespaces hold a pod of the same name).
    detailed = {(s.namespace, s.pod): s for s in source.fetch().samples}
    assert len(by_pod) == len(report.samples)
    assert set(by_pod) == set(detailed)
    for name, sample in by_pod.items():
        assert sample.workload == detailed[name].workload
        total = detailed[name].receive + detailed[name].transmit
        assert sample.receive + sample.transmit == pytest.approx(total, rel=1e-6)


def test_an_empty_learner_answer_says_what_is_missing(prometheus):
    report = _source(prometheus, podOwnerMetric="ksm_kube_pod_owner").samples()
    assert report.samples == () and report.missing == ("kube-state-metrics",)


@pytest.mark.parametrize("count", [2, 5, 27, FINEST])
def test_the_slices_together_are_every_pod_once(prometheus, count):
    whole = {(s.namespace, s.pod): s for s in _source(prometheus).samples().samples}
    source = _source(prometheus)  # the first slice reads the roll-up for the pass
    seen = []
    for index in range(count):
        part = source.samples(PodSlice(index, count)).samples
        assert all(PodSlice(index, count).holds(s.pod) for s in part)
        assert all(s.workload == whole[s.namespace, s.pod].workload for s in part)
        seen.extend((s.namespace, s.pod) for s in part)
    assert sorted(seen) == sorted(whole)


def test_the_pods_of_young_workloads_are_read_on_their_own(prometheus):
    session = CountingSession()
    report = _source(prometheus, session=session).young_samples()
    by_pod = {(s.namespace, s.pod): s for s in report.samples}
    # The young ReplicaSet's pod (not its namesake's in batch, whose
    # ReplicaSet is old) and the young Job's; a bare pod has no workload to learn.
    assert set(by_pod) == {("shop", "api-6c8d9f-k2"), ("batch", "etl.v2-x7k2p")}
    young = by_pod["shop", "api-6c8d9f-k2"]
    assert young.workload == Workload("shop", "Deployment", "api")  # rolled up
    assert by_pod["batch", "etl.v2-x7k2p"].workload == Workload("batch", "Job", "etl.v2")
    # rate() over the 2m window of a pod that has sent for 90 s: about 90/120 of it.
    assert young.receive + young.transmit == pytest.approx(16e6 * 90 / 120, rel=0.15)
    assert young.created == END - 90  # so the learner can tell
    assert session.calls == 3  # young controllers, their pods, the pods' samples


def test_the_learner_takes_a_young_pod_at_what_it_sends(prometheus):
    """Pods created within the window carry their creation time; the
    learner scales their rate() up to a whole window's: what they send."""
    settings = settings_from_mapping(
        {
            "prometheus": {"url": prometheus.url, "window": "2m"},
            "steering": {"podStartup": "1s"},  # the series' pods send from their creation
        }
    )
    report = _source(prometheus).samples()
    by_pod = {(s.namespace, s.pod): s for s in report.samples}
    assert by_pod["shop", "api-6c8d9f-k2"].created == END - 90
    assert by_pod["batch", "etl.v2-x7k2p"].created == END - 60
    assert by_pod["shop", "web-7d9c4b-a1"].created is None  # older than the window
    learner = BandwidthLearner.for_settings(settings, min_samples=1)
    measured = learner.bandwidth(by_pod["shop", "api-6c8d9f-k2"])
    sending = learner.sending(by_pod["shop", "api-6c8d9f-k2"], END)
    assert measured < 0.85 * 16e6  # rate() over the window shows about 90/120 of it
    assert sending == pytest.approx(16e6, rel=0.1)
    assert learner.sending(by_pod["shop", "db-0"], END) == learner.bandwidth(by_pod["shop", "db-0"])


def test_young_controllers_are_looked_for_every_other_round(prometheus):
    session, now = CountingSession(), [0.0]
    source = _source(prometheus, session=session, clock=lambda: now[0])  # interval 15s
    first = source.young_samples()
    assert session.calls == 3 and first.samples
    now[0] = 15.0  # the next round: the pods of the controllers found, no look
    assert source.young_samples().samples == first.samples
    assert session.calls == 5
    now[0] = 30.0  # the one after: a look again
    assert source.young_samples().samples == first.samples
    assert session.calls == 8


def test_no_young_workload_is_one_small_query(prometheus):
    session = CountingSession()
    assert (
        _source(prometheus, session=session, youngWorkloadAge="30s").young_samples().samples == ()
    )
    assert session.calls == 1


def test_a_large_new_workload_leaves_room_for_the_others():
    workloads = [("ns", "ReplicaSet", "big-5f6a7b"), ("ns", "Job", "small")]
    answer = [
        {
            "metric": {
                "namespace": "ns",
                "pod": f"big-5f6a7b-{i:05d}",
                "owner_kind": "ReplicaSet",
                "owner_name": "big-5f6a7b",
            }
        }
        for i in range(1000)
    ] + [
        {
            "metric": {
                "namespace": "ns",
                "pod": "small-x",
                "owner_kind": "Job",
                "owner_name": "small",
            }
        }
    ]
    pods = owned_pods_from(answer, workloads)
    assert len(pods) == 129  # 128 of the big one (256 shared by two), the small one's one
    assert ("ns", "small-x") in pods


def test_the_pod_count_is_kube_state_metrics_pods(prometheus):
    assert _source(prometheus).pod_count() == len(PODS)


@pytest.mark.parametrize(
    ("selector", "kept"),
    [
        ('pod!=""', ""),
        ('job="kubelet",pod!=""', 'job="kubelet",'),
        ('pod!="",job="kubelet"', 'job="kubelet",'),
    ],
)
def test_named_pods_are_selected_without_the_any_pod_matcher(selector, kept):
    # Prometheus resolves pod!="" over every pod name; a list of names needs none of it.
    learning = settings_from_mapping({"learning": {"podSelector": selector}}).learning
    query = build_learner_query(learning, 120.0, "both", "a|b")
    assert 'pod!=""' not in query
    assert f'container_network_receive_bytes_total{{{kept}pod=~"a|b"}}' in query
    assert f"container_network_receive_bytes_total{{{selector}}}" in build_learner_query(
        learning, 120.0, "both"
    )


PLACED = [
    PodSeries("shop", "web-7d9c4b-a1", 1e6, 1e6, "ReplicaSet", "web-7d9c4b", node="n1"),
    PodSeries("shop", "web-7d9c4b-b2", 1e6, 1e6, "ReplicaSet", "web-7d9c4b", node="n2"),
    PodSeries("shop", "api-6c8d9f-k2", 2e6, 2e6, "ReplicaSet", "api-6c8d9f", node="n3", age=90),
    PodSeries("shop", "db-0", 1e6, 1e6, "StatefulSet", "db", node="n2"),
]


def test_with_nodes_each_pod_has_its_node_and_one_without_pod_info_keeps_its_sample():
    # db-0 has no kube_pod_info series (a kube-state-metrics that leaves it
    # out): still learned, with no node. web-7d9c4b-b2 has two, on two
    # nodes (a second exporter behind): learned, with one of them.
    lines = [
        line
        for line in kube_lines(PLACED, REPLICASETS, END)
        if not (line.startswith("kube_pod_info{") and 'pod="db-0"' in line)
    ]
    lines += [
        line.replace('node="n2"', 'node="n5"').replace("10.0.9.9", "10.0.9.8")
        for line in lines
        if line.startswith("kube_pod_info{") and 'pod="web-7d9c4b-b2"' in line
    ]
    server = prometheus_with_history([], END, more=lines)
    try:
        settings = settings_from_mapping(
            {"prometheus": {"url": server.url, "window": "2m"}, "learning": {}}
        )
        prometheus = PrometheusSource(settings.prometheus, clock=lambda: END)
        source = PodTrafficSource(prometheus, settings.learning, with_nodes=True)
        expected = {"web-7d9c4b-a1": "n1", "web-7d9c4b-b2": "n2", "api-6c8d9f-k2": "n3", "db-0": ""}
        whole = {s.pod: s for s in source.samples().samples}
        assert whole["web-7d9c4b-b2"].node in ("n2", "n5")
        expected["web-7d9c4b-b2"] = whole["web-7d9c4b-b2"].node
        assert {pod: s.node for pod, s in whole.items()} == expected
        assert whole["db-0"].workload == Workload("shop", "StatefulSet", "db")
        sliced = [s for i in range(FINEST) for s in source.samples(PodSlice(i, FINEST)).samples]
        assert {s.pod: s.node for s in sliced} == expected
        young = source.young_samples().samples
        assert [(s.pod, s.node) for s in young] == [("api-6c8d9f-k2", "n3")]
        # Without a flow source no node is read.
        plain = PodTrafficSource(prometheus, settings.learning)
        assert {s.node for s in plain.samples().samples} == {""}
    finally:
        server.stop()
