"""The chart's recording rule nettraffic:node_network_utilization:ratio:
``promtool test rules`` on hand-made series for each node mapping, and live:
loaded into a real Prometheus scraping a live exporter, it gives every node
the LINK% that ``kubectl nettraffic top`` shows."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import requests
import yaml

from harness.exporter import LiveExporter
from harness.fakeapi import FakeKubeAPI, node
from harness.prometheus import Device, Exporter, PrometheusServer
from tests.test_chart import by_kind, render

pytestmark = pytest.mark.skipif(
    shutil.which("helm") is None or shutil.which("promtool") is None,
    reason="helm or promtool not on PATH (run through .ci/test)",
)

RULE = "nettraffic:node_network_utilization:ratio"


def rule_groups(*values: str) -> dict:
    """The rule file of the chart's rebalancing group, rendered with ``values``."""
    sets = [arg for value in values for arg in ("--set", value)]
    objects = render("helm", "--set", "rebalancing.enabled=true", *sets)
    (rule,) = by_kind(objects, "PrometheusRule")
    return {"groups": [g for g in rule["spec"]["groups"] if g["name"] == "nettraffic-rebalancing"]}


def test_the_group_joins_the_alerts_prometheus_rule_when_there_is_one():
    alone = by_kind(render("helm", "--set", "rebalancing.enabled=true"), "PrometheusRule")
    assert [r["metadata"]["name"] for r in alone] == ["nt-nettraffic-rebalancing"]
    both = by_kind(
        render("helm", "--set", "rebalancing.enabled=true", "--set", "prometheusRule.enabled=true"),
        "PrometheusRule",
    )
    assert [r["metadata"]["name"] for r in both] == ["nt-nettraffic"]
    assert [g["name"] for g in both[0]["spec"]["groups"]] == [
        "nettraffic",
        "nettraffic-rebalancing",
    ]
    assert not by_kind(render("helm"), "PrometheusRule")  # off by default


def counter(per_second: float) -> str:
    """promtool's expanding notation for a counter rising ``per_second``, one sample a minute."""
    return f"1000000000+{per_second * 60:g}x10"


def exporter_series(mode: str, instance: str, node_name: str) -> tuple[dict, list[dict]]:
    """Labels of one exporter's series, and the series that map it to
    ``node_name`` under prometheus.nodeMatch ``mode``."""
    labels = {"instance": instance, "job": "node-exporter"}
    if mode == "uname":
        return labels, [{"series": _selector("node_uname_info", {**labels, "nodename": node_name}),
                         "values": "1x10"}]  # fmt: skip
    if mode == "internal-ip":
        host = instance.rsplit(":", 1)[0].strip("[]")
        info = {"node": node_name, "internal_ip": host, "job": "kube-state-metrics"}
        return labels, [{"series": _selector("kube_node_info", info), "values": "1x10"}]
    return {**labels, "node": node_name}, []  # label:node


def _selector(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


def device_series(labels: dict, device: str, rx: float, tx: float, speed: float | None) -> list:
    with_device = {**labels, "device": device}
    series = [
        {
            "series": _selector("node_network_receive_bytes_total", with_device),
            "values": counter(rx),
        },
        {
            "series": _selector("node_network_transmit_bytes_total", with_device),
            "values": counter(tx),
        },
    ]
    if speed is not None:
        series.append({"series": _selector("node_network_speed_bytes", with_device),
                       "values": f"{speed:g}x10"})  # fmt: skip
    return series


def hand_made_cluster(mode: str) -> list[dict]:
    """a: 0.2 of its link, transmit the busier. b: two exporters (the higher
    counts, never the sum), no speed: measured against the slowest known
    (a's 10,000 B/s). c: over its speed, clamped to 1. Every node has a
    loopback device carrying more than its NIC: excluded."""
    series: list[dict] = []
    layout = [
        ("10.0.0.1:9100", "a", 1000.0, 2000.0, 10000.0),
        ("10.0.0.2:9100", "b", 3000.0, 500.0, None),
        ("10.0.0.3:9100", "b", 1000.0, 500.0, None),
        ("[fd00::4]:9100", "c", 90000.0, 1000.0, 50000.0),
    ]
    for instance, name, rx, tx, speed in layout:
        labels, mapping = exporter_series(mode, instance, name)
        series += mapping
        series += device_series(labels, "eth0", rx, tx, speed)
        series += device_series(labels, "lo", 1e9, 1e9, 1e12)
    return series


def expect(series: list[dict], values: dict[str, float]) -> dict:
    """One promtool test case: the rule at 5 minutes gives each node its value."""
    samples = [{"labels": _selector(RULE, {"instance": n}), "value": v} for n, v in values.items()]
    return {
        "interval": "1m",
        "input_series": series,
        "promql_expr_test": [{"expr": RULE, "eval_time": "5m", "exp_samples": samples}],
    }


def promtool_test(tmp_path, groups: dict, cases: list[dict]) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(groups))
    tests = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": cases}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("mode", ["uname", "internal-ip", "label:node"])
def test_promtool_unit_tests_for_each_node_mapping(mode, tmp_path):
    cluster = hand_made_cluster(mode)
    without_speeds = [s for s in cluster if "node_network_speed_bytes" not in s["series"]]
    promtool_test(
        tmp_path,
        rule_groups(f"prometheus.nodeMatch={mode}"),
        [
            expect(cluster, {"a": 0.2, "b": 0.3, "c": 1.0}),  # b: 3,000 B/s over a's 10,000
            # No node reports a link speed: no sample at all, so the
            # descheduler skips its cycle instead of evicting on a guess.
            expect(without_speeds, {}),
        ],
    )


def test_one_direction_only(tmp_path):
    # a: its 1,000 B/s received, not the 2,000 sent.
    cases = [expect(hand_made_cluster("uname"), {"a": 0.1, "b": 0.3, "c": 1.0})]
    promtool_test(tmp_path, rule_groups("prometheus.direction=receive"), cases)


LIVE = [  # node, rx, tx, link speed (None: not reported), all bytes/s
    ("fast-idle", 2e5, 1e5, 1.25e9),
    ("fast-busy", 6e8, 2e8, 1.25e9),
    ("slow-busy", 1e7, 9e7, 1.25e8),
    ("unknown-speed", 3e7, 1e7, None),
]


@pytest.mark.parametrize("mode", ["traffic", "link-utilization"])
def test_live_rule_matches_top_link_percent(mode, tmp_path):
    exporters = [
        Exporter(f"10.9.0.{i}:9100", name, [Device("eth0", rx, tx, speed)])
        for i, (name, rx, tx, speed) in enumerate(LIVE)
    ]
    groups = rule_groups("prometheus.window=10s")
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(groups))
    exporter = LiveExporter(exporters)
    prometheus = PrometheusServer(
        scrape_targets=[exporter.target], scrape_interval="1s", rule_files=[str(rules)]
    )
    api = FakeKubeAPI()
    try:
        for name, *_ in LIVE:
            api.put(node(name))
        kubeconfig = api.kubeconfig(str(tmp_path / "kubeconfig"))
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({
            "prometheus": {"url": prometheus.url, "window": "10s"},
            "metricsServer": {"enabled": False},
            "scoring": {"mode": mode},
        }))  # fmt: skip
        recorded = _recorded_after_full_window(prometheus)
        env = {**os.environ, "KUBECONFIG": kubeconfig}
        top = subprocess.run(
            [sys.executable, "-m", "kubectl_nettraffic.cli.main", "top", "--source", "prometheus",
             "--config", str(config), "-o", "json"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert top.returncode == 0, top.stderr
        shown = {n["name"]: n["linkUtilization"] for n in json.loads(top.stdout)["nodes"]}
    finally:
        api.stop()
        prometheus.stop()
        exporter.stop()
    slowest = min(speed for *_, speed in LIVE if speed)
    for name, rx, tx, speed in LIVE:
        assert recorded[name] == pytest.approx(max(rx, tx) / (speed or slowest), rel=0.02)
        if speed is None and mode == "traffic":
            assert shown[name] is None  # top shows "-": traffic mode assumes no speed
        else:
            assert recorded[name] == pytest.approx(shown[name], rel=0.02), name


def _recorded_after_full_window(prometheus: PrometheusServer) -> dict[str, float]:
    """The rule's values once 10 s of samples fill the rate window (a part-filled
    window under-reads) and it has been evaluated over them."""
    deadline = time.monotonic() + 60
    while True:
        answer = requests.get(
            f"{prometheus.url}/api/v1/query",
            params={
                "query": f"{RULE} and on () (min(count_over_time(node_uname_info[12s])) >= 12)"
            },
            timeout=5,
        ).json()
        result = answer["data"]["result"]
        if len(result) == len(LIVE):
            return {s["metric"]["instance"]: float(s["value"][1]) for s in result}
        assert time.monotonic() < deadline, f"no full window of {RULE} within 60 s: {answer}"
        time.sleep(0.5)
