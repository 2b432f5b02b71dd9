"""`kubectl nettraffic top pods|workloads` through the real kubectl, with
rates from the real Prometheus (backfilled cAdvisor and kube-state-metrics
series) and -l resolved by the fake API server. Golden outputs:
UPDATE_GOLDEN=1 rewrites them after a deliberate change."""

import json
import shutil
import time

import pytest
import yaml

from harness.fakeapi import FakeKubeAPI
from harness.prometheus import prometheus_with_history
from harness.reviews import pod
from kubectl_nettraffic.cli.render import POD_SORT_KEYS
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, kube_lines
from tests.harness.plugin import kubeconfig_in_namespace, kubectl_nettraffic
from tests.test_render import _golden

KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl not on PATH (run through .ci/test)"
)

PODS = [
    PodSeries("shop", "web-7d9c4b-a1", 30e6, 10e6, "ReplicaSet", "web-7d9c4b"),
    PodSeries("shop", "web-5f6a7b-b2", 20e6, 5e6, "ReplicaSet", "web-5f6a7b", runtime="cri-o"),
    PodSeries("shop", "db-0", 5e6, 1e6, "StatefulSet", "db"),
    PodSeries("shop", "debug", 1e3, 2e3),
    PodSeries("batch", "etl-x9", 80e6, 1e6, "Job", "etl"),
    PodSeries(
        "kube-system", "kube-proxy-n1", 90e6, 90e6, "DaemonSet", "kube-proxy", host_network=True
    ),
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    end = float(int(time.time()) + 600)
    more = list(
        kube_lines(
            PODS,
            [
                ReplicaSetSeries("shop", "web-7d9c4b", "web"),
                ReplicaSetSeries("shop", "web-5f6a7b", "web"),
            ],
            end,
            900,
        )
    )
    prometheus = prometheus_with_history([], end, duration=900, more=more)
    api = FakeKubeAPI()
    for spec in PODS:
        labels = {"app": spec.owner_name.split("-")[0] if spec.owner_name != "<none>" else "debug"}
        obj = pod(name=spec.pod, namespace=spec.namespace, labels=labels)
        api.put(obj, plural="pods")
    directory = tmp_path_factory.mktemp("pods")
    kubeconfig = kubeconfig_in_namespace(api, str(directory / "kubeconfig"), "shop")
    config = directory / "config.yaml"
    config.write_text(f"prometheus: {{url: '{prometheus.url}', window: 2m}}\n")
    yield kubeconfig, str(config)
    api.stop()
    prometheus.stop()


def _top(setup, *args):
    kubeconfig, config = setup
    return kubectl_nettraffic(
        kubeconfig, "top", *args, "--config", config, "--source", "prometheus"
    )


@pytest.mark.parametrize(
    "name, args",
    [
        ("top-pods.txt", ("pods",)),
        ("top-pods-all-wide.txt", ("pods", "-A", "-o", "wide")),
        ("top-workloads.txt", ("workloads", "-A")),
        (
            "top-workloads-by-name.txt",
            ("workloads", "-n", "shop", "--sort-by", "name", "--no-headers"),
        ),
        ("top-pods-selected.txt", ("pods", "-l", "app=web")),
    ],
)
def test_golden(setup, name, args):
    result = _top(setup, *args)
    assert result.returncode == 0, result.stderr
    _golden(name, result.stdout)


def test_json_and_yaml_carry_the_same_rows(setup):
    as_json = json.loads(_top(setup, "workloads", "-A", "-o", "json").stdout)
    as_yaml = yaml.safe_load(_top(setup, "workloads", "-A", "-o", "yaml").stdout)
    # (Two runs: their generatedAt may differ by a second.)
    assert {**as_json, "generatedAt": None} == {**as_yaml, "generatedAt": None}
    rows = {r["name"]: r for r in as_json["workloads"]}
    # The rollout's two ReplicaSets are one Deployment; hostNetwork pods are left out.
    assert rows["Deployment/web"]["pods"] == 2
    assert rows["Deployment/web"]["trafficBytesPerSecond"] == pytest.approx(65e6, rel=1e-3)
    assert "DaemonSet/kube-proxy" not in rows
    assert as_json["learnedFrom"] == "this window"


def test_usage_errors_name_the_value_and_the_choices(setup):
    # top pods and top workloads are commands of their own: the parser refuses
    # what does not apply to them, in the plugin's one-line error (exit 1).
    result = _top(setup, "pods", "extra")
    assert result.returncode == 1
    assert result.stderr.startswith("error: unrecognized arguments: extra\n")
    result = _top(setup, "pods", "--sort-by", "pods")
    assert result.returncode == 1
    assert "See 'kubectl nettraffic top pods --help' for usage." in result.stderr
    assert "invalid choice: 'pods' (choose from" in result.stderr
    assert all(f"{key}" in result.stderr.split("choose from")[1] for key in POD_SORT_KEYS)
    result = _top(setup, "--sort-by", "pods")  # top [NODE...] is top nodes
    assert result.returncode == 1 and "error: argument --sort-by" in result.stderr
    assert "'kubectl nettraffic top nodes --help'" in result.stderr
    result = _top(setup, "workloads", "--sort-by", "pods", "-o", "json")
    assert result.returncode == 0, result.stderr
