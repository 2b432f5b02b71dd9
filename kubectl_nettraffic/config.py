"""Settings shared by the webhook, the kubectl plugin and the Helm chart.

One YAML schema (DESIGN.md §3). Every key has its default here, in one place,
with the reason for it beside it. ``load_settings`` reads a file, applies
``--flag`` overrides (dotted keys), and validates everything at start, so a
bad value fails once with a message that names the key, the value and what is
expected, instead of failing later inside a request.
"""

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import yaml

from kubectl_nettraffic.errors import ConfigError
from kubectl_nettraffic.units import parse_duration, parse_quantity

# Virtual and container-network devices carry pod-to-pod traffic that is also
# counted on the physical NIC (or never leaves the host), so counting them
# would double or invent traffic.
DEFAULT_DEVICE_EXCLUDE = (
    "lo|veth.*|docker.*|cali.*|flannel.*|cni.*|cilium.*|lxc.*|kube-ipvs.*|tunl.*"
    "|vxlan.*|genev.*|br-.*|virbr.*|cbr.*|eni.*|tap.*"
)

DIRECTIONS = ("receive", "transmit", "both")
SCORING_MODES = ("traffic", "link-utilization")


@dataclass(frozen=True)
class PrometheusSettings:
    # Empty means "no Prometheus": the engine uses metrics-server alone.
    url: str = ""
    # 2m: at the usual 15-30s scrape interval rate() needs at least four
    # samples to be stable, and a longer window hides bursts that matter.
    window: float = 120.0
    # Empty: every device the exclusion regex lets through.
    device_include: str = ""
    device_exclude: str = DEFAULT_DEVICE_EXCLUDE
    # both: a saturated uplink in either direction hurts new pods.
    direction: str = "both"
    # uname: node_uname_info{nodename} is what node_exporter reports on every
    # install, so it works without any relabelling.
    node_match: str = "uname"
    # 2s: a refresh runs in the background, but a hung Prometheus must not
    # hold the refresher so long that snapshots go stale unnoticed.
    timeout: float = 2.0
    bearer_token_file: str = ""
    ca_file: str = ""
    insecure_skip_verify: bool = False
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MetricsServerSettings:
    # On: metrics-server ships with almost every cluster and is the fallback
    # when Prometheus is absent or down.
    enabled: bool = True


@dataclass(frozen=True)
class NodesSettings:
    # Empty: every node is eligible (subject to Ready, cordon and taints).
    selector: str = ""
    # Empty: nodes come from the API server (list + watch).
    file: str = ""


@dataclass(frozen=True)
class Weights:
    # Network only by default: CPU and memory are already the scheduler's job.
    network: float = 1.0
    cpu: float = 0.0
    memory: float = 0.0


@dataclass(frozen=True)
class ScoringSettings:
    # traffic: works without link speeds, which many clouds do not report.
    mode: str = "traffic"
    weights: Weights = field(default_factory=Weights)


@dataclass(frozen=True)
class RefreshSettings:
    # 15s: the most common node_exporter scrape interval; refreshing faster
    # only re-reads the same samples.
    interval: float = 15.0
    # 2m: eight missed refreshes; older data is no better than no data.
    max_staleness: float = 120.0


@dataclass(frozen=True)
class SteeringSettings:
    # 3: enough choice for the scheduler's other plugins (spread, resources)
    # while still keeping pods off the busy nodes.
    preferred_nodes: int = 3
    # 1Mi bytes/s: a modest service; pods say otherwise with the annotation
    # nettraffic.io/expected-bandwidth.
    default_pod_bandwidth: float = float(2**20)
    # 10s: typical time from admission to a running container; until then a
    # steered pod adds no traffic to the counters.
    pod_startup: float = 10.0
    scheduler_names: tuple[str, ...] = ("default-scheduler",)
    # true: a steered pod's booking moves to the node it is bound to, and is
    # dropped if the pod goes before binding (bindings.py). Costs a watch of
    # the pods this replica steered; needs pods list/watch (the chart grants it).
    follow_bindings: bool = True
    # true: one replica (a Lease) labels the nodes nettraffic.io/traffic-tier
    # 1..4 by rank, and every steered pod also prefers the quieter tiers, so
    # the preference holds in whichever sample of nodes kube-scheduler scores
    # (tiers.py). Needs patch on nodes; false writes nothing on Nodes.
    traffic_tiers: bool = True


@dataclass(frozen=True)
class LearningSettings:
    # true: learn each workload's bandwidth from cAdvisor and kube-state-metrics
    # (one more Prometheus query per learning round); off by itself without them.
    enabled: bool = True
    # The kubelet's cAdvisor counters, and the selector of pod-level series
    # (never by container: containerd says container="", CRI-O "POD").
    receive_metric: str = "container_network_receive_bytes_total"
    transmit_metric: str = "container_network_transmit_bytes_total"
    pod_selector: str = 'pod!=""'
    # kube-state-metrics' series, and the labels that carry the pod's namespace
    # and name there (exported_namespace/exported_pod where the scrape renames them).
    pod_owner_metric: str = "kube_pod_owner"
    replicaset_owner_metric: str = "kube_replicaset_owner"
    pod_info_metric: str = "kube_pod_info"
    namespace_label: str = "namespace"
    pod_label: str = "pod"
    # The Vertical Pod Autoscaler's: p90 of a histogram whose samples halve in
    # weight every 24h, plus 15% (workload_bandwidth.py).
    percentile: float = 0.9
    margin: float = 0.15
    half_life: float = 24 * 3600.0
    # Pod samples (one per pod per learning round) before a workload's figure is used.
    min_samples: int = 3
    # How often the learner reads per-pod traffic, at least: on its own thread,
    # so a slow query never delays the scores. 15s, as refresh.interval: a new
    # workload is known one round after its first pods have sent for a whole
    # window. At 150,000 pods the query takes about 11 s on a 2-core machine
    # (bench.learning); raise it to 1m there to spare Prometheus.
    interval: float = 15.0
    timeout: float = 30.0


@dataclass(frozen=True)
class TierLabelSettings:
    # The Lease that elects the one replica writing the labels.
    lease_name: str = "nettraffic-tier-labels"
    # Empty: the webhook pod's own namespace (POD_NAMESPACE, else the service
    # account's namespace file), else "default".
    lease_namespace: str = ""
    # 0.05: a node changes tier only once its rank is 5% of the nodes past the
    # tier's edge; at 5,000 nodes about 9 label writes a minute under the
    # placement benchmark's traffic (docs/benchmarks.md).
    hysteresis: float = 0.05
    # 20/s: a first labelling of 5,000 nodes takes about 4 minutes instead of a
    # burst of 5,000 PATCHes at the API server.
    writes_per_second: float = 20.0


@dataclass(frozen=True)
class ExtenderSettings:
    # 0 = no hard limit: the filter only drops ineligible nodes unless asked.
    max_traffic: float = 0.0
    max_link_utilization: float = 0.0


@dataclass(frozen=True)
class ServerSettings:
    # All interfaces: the API server reaches the pod through its Service.
    address: str = "0.0.0.0"
    port: int = 8443
    cert_file: str = "/etc/nettraffic/tls/tls.crt"
    key_file: str = "/etc/nettraffic/tls/tls.key"
    # 7Mi: the API server caps an object at 3Mi, an UPDATE review carries two
    # objects, plus room for the envelope.
    max_request_bytes: int = 7 * 2**20
    # One worker process: the in-flight ledger that spreads bursts lives in
    # process memory; threads give concurrency, replicas give HA. 4, not
    # more: one thread runs Python at a time (the GIL), and past a few, extra
    # threads mostly queue for it and for the steering lock; requests beyond
    # them wait in gunicorn's poller instead. At saturation 4 threads served
    # about 4% more admissions/s than 8 (docs/design/admission-performance.md, "Threads").
    threads: int = 4
    log_level: str = "info"
    # The longest a connection may take to finish its TLS handshake and send
    # a whole request (from accept, or from a kept-alive connection's first
    # byte), and a thread to write an answer. The API server sends a review
    # in milliseconds and stops waiting after its timeoutSeconds (10s by
    # default, 30s at most); a stalled client holds no thread meanwhile
    # (webhook.front), only a socket, so the bound is about resources.
    request_timeout: float = 10.0
    # Connections still sending their request; one more closes the oldest.
    # An API server under load keeps tens of connections open, almost all idle
    # between requests (kept alive, which this does not count).
    max_pending_connections: int = 256
    # All open connections (gunicorn's worker_connections, its own default):
    # at the limit the longest-idle kept-alive one is closed to make room.
    max_connections: int = 1000


@dataclass(frozen=True)
class Settings:
    kubeconfig: str = ""
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    metrics_server: MetricsServerSettings = field(default_factory=MetricsServerSettings)
    nodes: NodesSettings = field(default_factory=NodesSettings)
    scoring: ScoringSettings = field(default_factory=ScoringSettings)
    refresh: RefreshSettings = field(default_factory=RefreshSettings)
    steering: SteeringSettings = field(default_factory=SteeringSettings)
    tier_labels: TierLabelSettings = field(default_factory=TierLabelSettings)
    learning: LearningSettings = field(default_factory=LearningSettings)
    extender: ExtenderSettings = field(default_factory=ExtenderSettings)
    server: ServerSettings = field(default_factory=ServerSettings)


# ---------------------------------------------------------------- parsing

Parser = Callable[[str, Any], Any]


def _string(key: str, value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        raise ConfigError(f"config key {key}: {value!r} is not a string")
    return str(value)


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"config key {key}: {value!r} is not a boolean; use true or false")


def _duration(key: str, value: Any) -> float:
    try:
        seconds = parse_duration(str(value))
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error}") from None
    if seconds <= 0:
        raise ConfigError(f"config key {key}: {value!r} must be longer than zero")
    return seconds


def _bandwidth(key: str, value: Any) -> float:
    try:
        amount = parse_quantity(value)
    except ValueError as error:
        raise ConfigError(f"config key {key}: {error} (bytes/s)") from None
    if amount < 0:
        raise ConfigError(f"config key {key}: {value!r} must not be negative")
    return amount


def _weight(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(f"config key {key}: {value!r} is not a number")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(f"config key {key}: {value!r} is not a number") from None
    if not number >= 0 or number == float("inf"):
        raise ConfigError(f"config key {key}: {value!r} must be a finite number >= 0")
    return number


def _ratio(key: str, value: Any) -> float:
    number = _weight(key, value)
    if number > 1:
        raise ConfigError(f"config key {key}: {value!r} is a ratio; use 0 (off) up to 1")
    return number


def _positive(key: str, value: Any) -> float:
    number = _weight(key, value)
    if number <= 0:
        raise ConfigError(f"config key {key}: {value!r} must be above 0")
    return number


def _metric_name(key: str, value: Any) -> str:
    text = _string(key, value)
    if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", text):
        raise ConfigError(
            f"config key {key}: {text!r} is not a Prometheus metric or label name "
            "(letters, digits, _ and :, not starting with a digit)"
        )
    return text


def _percentile(key: str, value: Any) -> float:
    number = _weight(key, value)
    if not 0 < number < 1:
        raise ConfigError(f"config key {key}: {value!r} is a percentile; use 0.5 up to 0.99")
    return number


def _hysteresis(key: str, value: Any) -> float:
    number = _weight(key, value)
    if number >= 0.25:
        raise ConfigError(
            f"config key {key}: {value!r} is a share of the nodes below a tier's size (0.25); "
            "use 0 (none) up to 0.2"
        )
    return number


def _label_value(key: str, value: Any) -> str:
    text = _string(key, value)
    if text and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", text):
        raise ConfigError(
            f"config key {key}: {text!r} is not a valid object name "
            "(lower-case letters, digits and '-', at most 63)"
        )
    return text


def _integer(low: int, high: int) -> Parser:
    def parse(key: str, value: Any) -> int:
        try:
            number = int(str(value), 10) if not isinstance(value, bool) else None
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise ConfigError(f"config key {key}: {value!r} must be a whole number {low}..{high}")
        return number

    return parse


def _choice(*choices: str) -> Parser:
    def parse(key: str, value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"config key {key}: {value!r} is not one of {', '.join(choices)}")
        return str(value)

    return parse


def _regex(key: str, value: Any) -> str:
    text = _string(key, value)
    try:
        re.compile(text)
    except re.error as error:
        raise ConfigError(f"config key {key}: {text!r} is not a valid regex ({error})") from None
    if re.search(r"\(\?<?[=!]", text):
        raise ConfigError(
            f"config key {key}: {text!r} uses lookaround, which Prometheus (RE2) does not "
            "support; use plain alternatives like eth.*|ens.*"
        )
    return text


def _url(key: str, value: Any) -> str:
    text = _string(key, value).strip()
    if not text:
        return ""
    parsed = urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(
            f"config key {key}: {text!r} is not an http(s) URL; "
            "write it like http://prometheus.monitoring.svc:9090"
        )
    return text.rstrip("/")


def _node_match(key: str, value: Any) -> str:
    text = _string(key, value)
    if text in ("uname", "internal-ip"):
        return text
    if text.startswith("label:") and re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", text[6:]):
        return text
    raise ConfigError(
        f"config key {key}: {text!r} is not uname, internal-ip or label:<prometheus label name>"
    )


def _headers(key: str, value: Any) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"config key {key}: {value!r} is not a map of header name to value")
    return {str(name): _string(f"{key}.{name}", item) for name, item in value.items()}


def _scheduler_names(key: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"config key {key}: {value!r} is not a non-empty list of scheduler names")
    return tuple(value)


def _log_level(key: str, value: Any) -> str:
    return str(_choice("debug", "info", "warning", "error")(key, str(value).lower()))


# YAML key -> (dataclass field, parser). Nested sections map to dataclasses.
_SCHEMA: dict[str, tuple[str, Any]] = {
    "kubeconfig": ("kubeconfig", _string),
    "prometheus": (
        "prometheus",
        {
            "url": ("url", _url),
            "window": ("window", _duration),
            "deviceInclude": ("device_include", _regex),
            "deviceExclude": ("device_exclude", _regex),
            "direction": ("direction", _choice(*DIRECTIONS)),
            "nodeMatch": ("node_match", _node_match),
            "timeout": ("timeout", _duration),
            "bearerTokenFile": ("bearer_token_file", _string),
            "caFile": ("ca_file", _string),
            "insecureSkipVerify": ("insecure_skip_verify", _boolean),
            "headers": ("headers", _headers),
        },
    ),
    "metricsServer": ("metrics_server", {"enabled": ("enabled", _boolean)}),
    "nodes": ("nodes", {"selector": ("selector", _string), "file": ("file", _string)}),
    "scoring": (
        "scoring",
        {
            "mode": ("mode", _choice(*SCORING_MODES)),
            "weights": (
                "weights",
                {
                    "network": ("network", _weight),
                    "cpu": ("cpu", _weight),
                    "memory": ("memory", _weight),
                },
            ),
        },
    ),
    "refresh": (
        "refresh",
        {
            "interval": ("interval", _duration),
            "maxStaleness": ("max_staleness", _duration),
        },
    ),
    "steering": (
        "steering",
        {
            "preferredNodes": ("preferred_nodes", _integer(1, 20)),
            "defaultPodBandwidth": ("default_pod_bandwidth", _bandwidth),
            "podStartup": ("pod_startup", _duration),
            "schedulerNames": ("scheduler_names", _scheduler_names),
            "followBindings": ("follow_bindings", _boolean),
            "trafficTiers": ("traffic_tiers", _boolean),
        },
    ),
    "learning": (
        "learning",
        {
            "enabled": ("enabled", _boolean),
            "receiveMetric": ("receive_metric", _metric_name),
            "transmitMetric": ("transmit_metric", _metric_name),
            "podSelector": ("pod_selector", _string),
            "podOwnerMetric": ("pod_owner_metric", _metric_name),
            "replicaSetOwnerMetric": ("replicaset_owner_metric", _metric_name),
            "podInfoMetric": ("pod_info_metric", _metric_name),
            "namespaceLabel": ("namespace_label", _metric_name),
            "podLabel": ("pod_label", _metric_name),
            "percentile": ("percentile", _percentile),
            "margin": ("margin", _weight),
            "halfLife": ("half_life", _duration),
            "minSamples": ("min_samples", _integer(1, 10000)),
            "interval": ("interval", _duration),
            "timeout": ("timeout", _duration),
        },
    ),
    "tierLabels": (
        "tier_labels",
        {
            "leaseName": ("lease_name", _label_value),
            "leaseNamespace": ("lease_namespace", _label_value),
            "hysteresis": ("hysteresis", _hysteresis),
            "writesPerSecond": ("writes_per_second", _positive),
        },
    ),
    "extender": (
        "extender",
        {
            "maxTrafficBytesPerSecond": ("max_traffic", _bandwidth),
            "maxLinkUtilization": ("max_link_utilization", _ratio),
        },
    ),
    "server": (
        "server",
        {
            "address": ("address", _string),
            "port": ("port", _integer(1, 65535)),
            "certFile": ("cert_file", _string),
            "keyFile": ("key_file", _string),
            "maxRequestBytes": ("max_request_bytes", _integer(64 * 1024, 64 * 2**20)),
            "threads": ("threads", _integer(1, 256)),
            "logLevel": ("log_level", _log_level),
            "requestTimeout": ("request_timeout", _duration),
            "maxPendingConnections": ("max_pending_connections", _integer(1, 10_000)),
            "maxConnections": ("max_connections", _integer(10, 100_000)),
        },
    ),
}

_SECTION_TYPES: dict[str, type] = {
    "prometheus": PrometheusSettings,
    "metricsServer": MetricsServerSettings,
    "nodes": NodesSettings,
    "scoring": ScoringSettings,
    "scoring.weights": Weights,
    "refresh": RefreshSettings,
    "steering": SteeringSettings,
    "tierLabels": TierLabelSettings,
    "learning": LearningSettings,
    "extender": ExtenderSettings,
    "server": ServerSettings,
}


def _build(path: str, schema: dict[str, tuple[str, Any]], raw: Any, target: type) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        where = f"config key {path}" if path else "config file"
        raise ConfigError(f"{where}: expected a map of keys, got {raw!r}")
    unknown = sorted(set(raw) - set(schema))
    if unknown:
        key = f"{path}.{unknown[0]}" if path else str(unknown[0])
        raise ConfigError(
            f"unknown config key {key}; known keys here are {', '.join(sorted(schema))}"
        )
    values: dict[str, Any] = {}
    for yaml_key, (attribute, parser) in schema.items():
        if yaml_key not in raw:
            continue
        key = f"{path}.{yaml_key}" if path else yaml_key
        if isinstance(parser, dict):
            values[attribute] = _build(key, parser, raw[yaml_key], _SECTION_TYPES[key])
        else:
            values[attribute] = parser(key, raw[yaml_key])
    return target(**values)


def _cross_checks(settings: Settings) -> None:
    if settings.refresh.max_staleness < settings.refresh.interval:
        raise ConfigError(
            f"config key refresh.maxStaleness: {settings.refresh.max_staleness:g}s is shorter "
            f"than refresh.interval ({settings.refresh.interval:g}s); every snapshot would be "
            "stale. Make maxStaleness at least the interval (4x is usual)"
        )
    weights = settings.scoring.weights
    if weights.network + weights.cpu + weights.memory == 0:
        raise ConfigError(
            "config keys scoring.weights.*: all weights are 0, so every node would tie; "
            "give network (or cpu/memory) a weight above 0"
        )
    if not settings.prometheus.url and not settings.metrics_server.enabled:
        raise ConfigError(
            "config keys prometheus.url and metricsServer.enabled: with no Prometheus URL "
            "and metrics-server disabled there is nothing to score nodes by; set prometheus.url"
        )


def settings_from_mapping(raw: Any) -> Settings:
    """Validate an already-parsed config mapping into Settings."""
    settings: Settings = _build("", _SCHEMA, raw, Settings)
    _cross_checks(settings)
    return settings


def apply_override(raw: dict[str, Any], dotted_key: str, value: Any) -> None:
    """Set ``prometheus.url`` style keys in a raw config mapping (for CLI flags)."""
    parts = dotted_key.split(".")
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"config key {dotted_key}: {part} is not a section")
        node = child
    node[parts[-1]] = value


def read_config_file(path: str) -> dict[str, Any]:
    """The raw mapping in a YAML config file; empty file is an empty mapping."""
    try:
        with open(path, encoding="utf-8") as handle:
            raw = yaml.safe_load(handle)
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist; check --config") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path!r} is not valid YAML: {error}") from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path!r}: expected a map of keys at the top level")
    return raw


def load_settings(path: str | None = None, overrides: Mapping[str, Any] | None = None) -> Settings:
    """Read ``path`` (if given), apply dotted-key overrides, validate."""
    raw = read_config_file(path) if path else {}
    for key, value in (overrides or {}).items():
        if value is not None:
            apply_override(raw, key, value)
    return settings_from_mapping(raw)
