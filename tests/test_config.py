import re
from pathlib import Path

import pytest

from kubectl_nettraffic.config import DEFAULT_DEVICE_EXCLUDE, config_keys, settings_from_mapping
from kubectl_nettraffic.config_file import load_settings
from kubectl_nettraffic.errors import ConfigError


def test_defaults_match_the_design_contract():
    settings = settings_from_mapping({})
    assert settings.prometheus.url == ""
    assert settings.prometheus.window == 120
    assert settings.prometheus.device_exclude == DEFAULT_DEVICE_EXCLUDE
    assert settings.prometheus.direction == "both"
    assert settings.prometheus.node_match == "uname"
    assert settings.prometheus.timeout == 2
    assert settings.metrics_server.enabled is True
    assert settings.scoring.mode == "traffic"
    assert (settings.scoring.weights.network, settings.scoring.weights.cpu) == (1.0, 0.0)
    assert settings.refresh.interval == 15 and settings.refresh.max_staleness == 120
    assert settings.steering.preferred_nodes == 3
    assert settings.steering.default_pod_bandwidth == 2**20
    assert settings.steering.scheduler_names == ("default-scheduler",)
    assert settings.server.port == 8443


def test_full_file_round_trip(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        """
prometheus:
  url: https://thanos.example:9090/
  window: 1m30s
  deviceInclude: eth.*|ens.*
  direction: transmit
  nodeMatch: label:node
  timeout: 500ms
  headers: {X-Scope-OrgID: team-a}
nodes: {selector: "filter.xy.com"}
scoring: {mode: link-utilization, weights: {network: 2, cpu: 0.5}}
steering: {preferredNodes: 5, defaultPodBandwidth: 500k, schedulerNames: [default-scheduler, batch]}
"""
    )
    settings = load_settings(str(path), {"refresh.interval": "30s"})
    assert settings.prometheus.url == "https://thanos.example:9090"
    assert settings.prometheus.window == 90
    assert settings.prometheus.timeout == 0.5
    assert settings.prometheus.headers == {"X-Scope-OrgID": "team-a"}
    assert settings.prometheus.node_match == "label:node"
    assert settings.scoring.weights.network == 2 and settings.scoring.weights.cpu == 0.5
    assert settings.steering.default_pod_bandwidth == 500_000
    assert settings.steering.scheduler_names == ("default-scheduler", "batch")
    assert settings.refresh.interval == 30


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"prometheus": {"window": "2x"}}, "prometheus.window: '2x' is not a duration"),
        ({"prometheus": {"window": "0s"}}, "prometheus.window: '0s' must be longer than zero"),
        (
            {"prometheus": {"deviceExclude": "eth[0"}},
            "prometheus.deviceExclude: 'eth[0' is not a valid regex",
        ),
        ({"prometheus": {"deviceInclude": "(?!lo).*"}}, "uses lookaround"),
        (
            {"prometheus": {"url": "prometheus:9090"}},
            "prometheus.url: 'prometheus:9090' is not an http(s) URL",
        ),
        (
            {"prometheus": {"direction": "up"}},
            "prometheus.direction: 'up' is not one of receive, transmit, both",
        ),
        ({"prometheus": {"nodeMatch": "label:"}}, "prometheus.nodeMatch"),
        (
            {"scoring": {"weights": {"cpu": -1}}},
            "scoring.weights.cpu: -1 must be a finite number >= 0",
        ),
        ({"scoring": {"weights": {"network": 0}}}, "all weights are 0"),
        ({"prometheus": {"urll": "x"}}, "unknown config key prometheus.urll"),
        ({"promethus": {}}, "unknown config key promethus"),
        (
            {"steering": {"preferredNodes": 0}},
            "steering.preferredNodes: 0 must be a whole number 1..20",
        ),
        (
            {"steering": {"percentageOfNodesToScore": 101}},
            "steering.percentageOfNodesToScore: 101 must be a whole number 0..100",
        ),
        (
            {"steering": {"defaultPodBandwidth": "1Mb"}},
            "steering.defaultPodBandwidth: '1Mb' is not a quantity",
        ),
        ({"refresh": {"interval": "1m", "maxStaleness": "30s"}}, "shorter than refresh.interval"),
        ({"metricsServer": {"enabled": "yes"}}, "metricsServer.enabled: 'yes' is not a boolean"),
        ({"metricsServer": {"enabled": False}}, "nothing to score nodes by"),
        ({"prometheus": "http://x"}, "config key prometheus: expected a map"),
    ],
)
def test_bad_values_name_key_value_and_fix(raw, expected):
    with pytest.raises(ConfigError) as caught:
        settings_from_mapping(raw)
    assert expected in str(caught.value)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist; check --config"):
        load_settings(str(tmp_path / "nope.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("prometheus: [unclosed")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_settings(str(bad))


def _documented_keys() -> set[str]:
    """The keys in the first column of docs/configuration.md's table; a row
    may name several (`learning.percentile` / `margin`, `scoring.weights.network/cpu/memory`)."""
    text = (Path(__file__).parent.parent / "docs" / "configuration.md").read_text()
    keys: set[str] = set()
    for row in text.splitlines():
        if not row.startswith("| `"):
            continue
        prefix = ""
        for item in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            for piece in item.split("/"):
                if "." in piece:
                    prefix = piece.rsplit(".", 1)[0]
                    keys.add(piece)
                else:
                    keys.add(f"{prefix}.{piece}" if prefix else piece)
    return keys


def test_every_config_key_is_documented_and_every_documented_key_exists():
    declared = set(config_keys())
    documented = _documented_keys()
    assert declared - documented == set(), "keys missing from docs/configuration.md"
    assert documented - declared == set(), "docs/configuration.md names keys that do not exist"
