"""Settings shared by the webhook, the kubectl plugin and the Helm chart.

One YAML schema (docs/design/architecture.md, Contracts). Every key is declared once, as a field of a
frozen dataclass: its default with the reason for it beside it, the parser
that validates a configured value (config_values.py), and its YAML name
when that is not the field's name in camelCase. ``settings_from_mapping``
validates a parsed mapping at start, so a bad value fails once with a message
that names the key, the value and what is expected, instead of failing later
inside a request; config_file.py reads the file and applies --flag overrides.
docs/configuration.md documents every key (a test holds the two equal).
"""

from collections.abc import Iterator, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any

from kubectl_nettraffic import config_values as values
from kubectl_nettraffic.config_values import Parser
from kubectl_nettraffic.errors import ConfigError

# Virtual and container-network devices carry pod-to-pod traffic that is also
# counted on the physical NIC (or never leaves the host), so counting them
# would double or invent traffic.
DEFAULT_DEVICE_EXCLUDE = (
    "lo|veth.*|docker.*|cali.*|flannel.*|cni.*|cilium.*|lxc.*|kube-ipvs.*|tunl.*"
    "|vxlan.*|genev.*|br-.*|virbr.*|cbr.*|eni.*|tap.*"
)

DIRECTIONS = ("receive", "transmit", "both")
SCORING_MODES = ("traffic", "link-utilization")


def key(default: Any, parse: Parser, name: str | None = None) -> Any:
    """A config key: its default, the parser of a configured value, and its
    YAML name when that is not the field's name in camelCase."""
    metadata = {"parse": parse, "name": name}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def section(settings_type: type) -> Any:
    """A nested section of keys, named by the field in camelCase."""
    return field(default_factory=settings_type, metadata={"section": settings_type})


def yaml_name(declared: "Field[Any]") -> str:
    if declared.metadata.get("name"):
        return str(declared.metadata["name"])
    first, *rest = declared.name.split("_")
    return first + "".join(part.capitalize() for part in rest)


@dataclass(frozen=True)
class PrometheusSettings:
    # Empty means "no Prometheus": the engine uses metrics-server alone.
    url: str = key("", values.url)
    # 2m: at the usual 15-30s scrape interval rate() needs at least four
    # samples to be stable, and a longer window hides bursts that matter.
    window: float = key(120.0, values.duration)
    # Empty: every device the exclusion regex lets through.
    device_include: str = key("", values.regex)
    device_exclude: str = key(DEFAULT_DEVICE_EXCLUDE, values.regex)
    # both: a saturated uplink in either direction hurts new pods.
    direction: str = key("both", values.choice(*DIRECTIONS))
    # uname: node_uname_info{nodename} is what node_exporter reports on every
    # install, so it works without any relabelling.
    node_match: str = key("uname", values.node_match)
    # 2s: a refresh runs in the background, but a hung Prometheus must not
    # hold the refresher so long that snapshots go stale unnoticed.
    timeout: float = key(2.0, values.duration)
    bearer_token_file: str = key("", values.string)
    ca_file: str = key("", values.string)
    insecure_skip_verify: bool = key(False, values.boolean)
    headers: Mapping[str, str] = key({}, values.headers)


@dataclass(frozen=True)
class MetricsServerSettings:
    # On: metrics-server ships with almost every cluster and is the fallback
    # when Prometheus is absent or down.
    enabled: bool = key(True, values.boolean)


@dataclass(frozen=True)
class NodesSettings:
    # Empty: every node is eligible (subject to Ready, cordon and taints).
    selector: str = key("", values.string)
    # Empty: nodes come from the API server (list + watch).
    file: str = key("", values.string)


@dataclass(frozen=True)
class Weights:
    # Network only by default: CPU and memory are already the scheduler's job.
    network: float = key(1.0, values.weight)
    cpu: float = key(0.0, values.weight)
    memory: float = key(0.0, values.weight)


@dataclass(frozen=True)
class ScoringSettings:
    # traffic: works without link speeds, which many clouds do not report.
    mode: str = key("traffic", values.choice(*SCORING_MODES))
    weights: Weights = section(Weights)


@dataclass(frozen=True)
class RefreshSettings:
    # 15s: the most common node_exporter scrape interval; refreshing faster
    # only re-reads the same samples.
    interval: float = key(15.0, values.duration)
    # 2m: eight missed refreshes; older data is no better than no data.
    max_staleness: float = key(120.0, values.duration)


@dataclass(frozen=True)
class SteeringSettings:
    # 3: enough choice for the scheduler's other plugins (spread, resources)
    # while still keeping pods off the busy nodes.
    preferred_nodes: int = key(3, values.integer(1, 20))
    # 1Mi bytes/s: a modest service; pods say otherwise with the annotation
    # nettraffic.io/expected-bandwidth.
    default_pod_bandwidth: float = key(float(2**20), values.bandwidth)
    # 10s: typical time from admission to a running container; until then a
    # steered pod adds no traffic to the counters.
    pod_startup: float = key(10.0, values.duration)
    scheduler_names: tuple[str, ...] = key(("default-scheduler",), values.scheduler_names)
    # true: a steered pod's booking moves to the node it is bound to, and is
    # dropped if the pod goes before binding (kube/binding_watch.py). Costs a watch of
    # the pods this replica steered; needs pods list/watch (the chart grants it).
    follow_bindings: bool = key(True, values.boolean)
    # true: one replica (a Lease) labels the nodes nettraffic.io/traffic-tier
    # 1..4 by rank, and every steered pod also prefers the quieter tiers, so
    # the preference holds in whichever sample of nodes kube-scheduler scores
    # (tiers.py). Needs patch on nodes; false writes nothing on Nodes.
    traffic_tiers: bool = key(True, values.boolean)
    # 0: off. Above 0: a pod whose expected bandwidth is known (annotated, or
    # learned from its workload) and below this share of the slowest eligible
    # link gets the descheduler's prefer-no-eviction annotation, so that a
    # hot node sheds its heavier pods first. Off until bench.rebalancing shows
    # it pays (docs/operations.md, Rebalancing).
    prefer_no_eviction_below: float = key(0.0, values.ratio)
    # 0.5: below half its speed a link queues a pod's packets no longer than
    # another does, so the nodes are alike and kube-scheduler's own plugins
    # decide; past it each share more costs the pod (scoring/savings.py).
    busy_above: float = key(0.5, values.busy_share)
    # 5 and 3: kube-scheduler's own default topology spread constraints
    # (PodTopologySpread's systemDefaultConstraints), for the pods that carry
    # none of their own; set them as your scheduler's defaultConstraints. 0:
    # not kept (scoring/spread.py).
    zone_max_skew: int = key(5, values.integer(0, 1000))
    hostname_max_skew: int = key(3, values.integer(0, 1000))
    # 0: kube-scheduler's own default (adaptive: it scores a sample of the
    # nodes above 100). Set it as your scheduler profile's
    # percentageOfNodesToScore: where it scores a sample, the nodes beside a
    # pod's peers get terms of near the first's weight (scoring/placement.py).
    percentage_of_nodes_to_score: int = key(0, values.integer(0, 100))


@dataclass(frozen=True)
class LearningSettings:
    # true: learn each workload's bandwidth from cAdvisor and kube-state-metrics
    # (one more Prometheus query per learning round); off by itself without them.
    enabled: bool = key(True, values.boolean)
    # The kubelet's cAdvisor counters, and the selector of pod-level series
    # (never by container: containerd says container="", CRI-O "POD").
    receive_metric: str = key("container_network_receive_bytes_total", values.metric_name)
    transmit_metric: str = key("container_network_transmit_bytes_total", values.metric_name)
    pod_selector: str = key('pod!=""', values.string)
    # kube-state-metrics' series, and the labels that carry the pod's namespace
    # and name there (exported_namespace/exported_pod where the scrape renames them).
    pod_owner_metric: str = key("kube_pod_owner", values.metric_name)
    replicaset_owner_metric: str = key(
        "kube_replicaset_owner", values.metric_name, name="replicaSetOwnerMetric"
    )
    pod_info_metric: str = key("kube_pod_info", values.metric_name)
    namespace_label: str = key("namespace", values.metric_name)
    pod_label: str = key("pod", values.metric_name)
    # The Vertical Pod Autoscaler's: p90 of a histogram whose samples halve in
    # weight every 24h, plus 15% (workload_bandwidth.py).
    percentile: float = key(0.9, values.percentile)
    margin: float = key(0.15, values.weight)
    half_life: float = key(24 * 3600.0, values.duration)
    # Pod samples (one per pod per learning round) before a workload's figure is used.
    min_samples: int = key(3, values.integer(1, 10000))
    # How often the learner reads per-pod traffic, at least: on its own thread,
    # so a slow query never delays the scores. 15s, as refresh.interval: a new
    # workload is known one round after its first pods have sent for a whole
    # window.
    interval: float = key(15.0, values.duration)
    # The share of any minute the learner's queries may take, in wall-clock
    # time from sending a query to its parsed answer (learning/schedule.py):
    # 2.5%, 1.5 s of query time a minute, which bounds the Prometheus CPU
    # they cost (docs/operations.md says by how much). Reading every pod of a
    # large cluster at once would take much of a core (python -m
    # bench.learning), so it is read in slices; the learned figures halve in
    # weight daily, so a pass of many minutes loses little.
    prometheus_share: float = key(0.025, values.share)
    # The pods of controllers (ReplicaSets, StatefulSets, Jobs) created this
    # recently are read on their own every interval, between the slices of a
    # large cluster, so a new workload is learned within a round or two of its
    # pods sending. 5m: a workload's pods start within it, and its figure,
    # once learned, stays.
    young_workload_age: float = key(300.0, values.duration)
    timeout: float = key(30.0, values.duration)


PEER_SOURCES = ("none", "istio", "linkerd", "beyla", "obi", "query")


@dataclass(frozen=True)
class PeerLabelSettings:
    # The labels that name a flow's two ends, for ``peers.source: query``
    # (Istio's names by default).
    source_workload: str = key("source_workload", values.metric_name)
    source_namespace: str = key("source_workload_namespace", values.metric_name)
    destination_workload: str = key("destination_workload", values.metric_name)
    destination_namespace: str = key("destination_workload_namespace", values.metric_name)


@dataclass(frozen=True)
class PeerRecordingRuleSettings:
    # Off: the learner computes every pair's rate at each read, twice (once
    # per end it cuts by). On: Prometheus records them once an interval
    # (the chart's PrometheusRule, nettraffic:workload_pairs:bytes_per_second)
    # and the read cuts the recorded series; without recorded pairs it
    # reads the flow metrics as when off.
    enabled: bool = key(False, values.boolean)
    # The rule group's evaluation interval, as the chart writes it.
    interval: float = key(60.0, values.rule_interval)


@dataclass(frozen=True)
class PeerSettings:
    # Where the bytes between workloads come from: none (no conversations
    # counted, steering as without peers), istio, linkerd (the meshes'
    # standard metrics), beyla (Grafana Beyla's network flows), obi (its
    # successor in OpenTelemetry), query (the user's own, below).
    source: str = key("none", values.choice(*PEER_SOURCES))
    # Istio's reporter whose series are read: each flow is reported by both
    # ends' proxies; one of them, so that nothing counts twice.
    reporter: str = key("source", values.choice("source", "destination", "waypoint"))
    # For source: query, an instant PromQL query returning bytes/s per pair
    # of workloads, with the labels below.
    query: str = key("", values.string)
    labels: PeerLabelSettings = section(PeerLabelSettings)
    recording_rule: PeerRecordingRuleSettings = section(PeerRecordingRuleSettings)
    # A Prometheus shared by several clusters (Thanos, Mimir): label=value
    # selecting this cluster's flow series (k8s_cluster_name for Beyla and
    # OBI, source_cluster for Istio, your relabelled one for Linkerd); empty:
    # every series. A query of your own selects its own.
    cluster: str = key("", values.label_matcher)
    # The busiest peers kept per workload: a workload that talks to
    # hundreds (a gateway, a database) is steered by the few that matter,
    # and the table stays small at 150,000 pods.
    max_per_workload: int = key(8, values.integer(1, 1000))
    # Keep each pair's bytes each way apart (Istio, Linkerd; Beyla's and
    # OBI's flows are one way each already), for top workloads. Off: the
    # pair's total alone, which is all the pull counts; on, the read brings
    # a series per way and computes the pairs once more to cut them on
    # their totals (docs/operations.md, "Reading the pairs at scale").
    bytes_each_way: bool = key(False, values.boolean)
    # The score points (of 100) a node gains for a pod all of whose bytes
    # go to peers on it; eight times as much again for its zone at the default
    # price below. A tenth of the bytes, a tenth of the points
    # (steering/peer_pull.py).
    pull_points: float = key(40.0, values.weight)
    # What crossing zones costs, per GB each way ($0.01 on AWS and GCP):
    # shown by top workloads; the zone's pull scales with it (0: zones are
    # not counted).
    cross_zone_price_per_gb: float = key(0.01, values.weight, name="crossZonePricePerGB")
    # A node whose link would be fuller than this with the pod gains nothing
    # from its peers: peers never take a node past hot.
    max_link_utilization: float = key(0.8, values.ratio)
    # 3: pairs read three learner passes ago (each pass reads every pod, a
    # few minutes on a large cluster) may have moved; older ones stop
    # pulling until a flow read succeeds again.
    max_age_passes: int = key(3, values.integer(1, 1000))
    # How the pull counts where a caller's bytes go: services (each called
    # workload's Services as kube-proxy routes them, read from their
    # EndpointSlices' hints once a learner pass; needs the API server),
    # spread (every Service spreads its clients' connections evenly), zone
    # (a mesh keeps them in the caller's zone first: Istio's locality load
    # balancing).
    routing: str = key("services", values.choice("services", "spread", "zone"))


@dataclass(frozen=True)
class TierLabelSettings:
    # The Lease that elects the one replica writing the labels.
    lease_name: str = key("nettraffic-tier-labels", values.label_value)
    # Empty: the webhook pod's own namespace (POD_NAMESPACE, else the service
    # account's namespace file), else "default".
    lease_namespace: str = key("", values.label_value)
    # 0.05: a node changes tier only once its rank is 5% of the nodes past the
    # tier's edge, so ranks that jitter around an edge write no labels (the
    # writes per minute it costs: python -m bench.placement, docs/benchmarks.md).
    hysteresis: float = key(0.05, values.hysteresis)
    # 20/s: a first labelling of 5,000 nodes takes about 4 minutes instead of a
    # burst of 5,000 PATCHes at the API server.
    writes_per_second: float = key(20.0, values.positive)


@dataclass(frozen=True)
class ExtenderSettings:
    # 0 = no hard limit: the filter only drops ineligible nodes unless asked.
    max_traffic: float = key(0.0, values.bandwidth, name="maxTrafficBytesPerSecond")
    max_link_utilization: float = key(0.0, values.ratio)


@dataclass(frozen=True)
class ServerSettings:
    # All interfaces: the API server reaches the pod through its Service.
    address: str = key("0.0.0.0", values.string)
    port: int = key(8443, values.integer(1, 65535))
    cert_file: str = key("/etc/nettraffic/tls/tls.crt", values.string)
    key_file: str = key("/etc/nettraffic/tls/tls.key", values.string)
    # 7Mi: the API server caps an object at 3Mi, an UPDATE review carries two
    # objects, plus room for the envelope.
    max_request_bytes: int = key(7 * 2**20, values.integer(64 * 1024, 64 * 2**20))
    # One worker process: the in-flight bookings that spread bursts live in
    # process memory; threads give concurrency, replicas give HA. 4, not
    # more: one thread runs Python at a time (the GIL), and past a few, extra
    # threads mostly queue for it and for the steering lock; requests beyond
    # them wait in gunicorn's poller instead (docs/design/admission-performance.md,
    # "Threads", compares 4 with 8).
    threads: int = key(4, values.integer(1, 256))
    log_level: str = key("info", values.log_level)
    # The longest a connection may take to finish its TLS handshake and send
    # a whole request (from accept, or from a kept-alive connection's first
    # byte), and a thread to write an answer. The API server sends a review
    # in milliseconds and stops waiting after its timeoutSeconds (10s by
    # default, 30s at most); a stalled client holds no thread meanwhile
    # (webhook.front), only a socket, so the bound is about resources.
    request_timeout: float = key(10.0, values.duration)
    # Connections still sending their request; one more closes the oldest.
    # An API server under load keeps tens of connections open, almost all idle
    # between requests (kept alive, which this does not count).
    max_pending_connections: int = key(256, values.integer(1, 10_000))
    # All open connections (gunicorn's worker_connections, its own default):
    # at the limit the longest-idle kept-alive one is closed to make room.
    max_connections: int = key(1000, values.integer(10, 100_000))


@dataclass(frozen=True)
class Settings:
    kubeconfig: str = key("", values.string)
    prometheus: PrometheusSettings = section(PrometheusSettings)
    metrics_server: MetricsServerSettings = section(MetricsServerSettings)
    nodes: NodesSettings = section(NodesSettings)
    scoring: ScoringSettings = section(ScoringSettings)
    refresh: RefreshSettings = section(RefreshSettings)
    steering: SteeringSettings = section(SteeringSettings)
    tier_labels: TierLabelSettings = section(TierLabelSettings)
    learning: LearningSettings = section(LearningSettings)
    peers: PeerSettings = section(PeerSettings)
    extender: ExtenderSettings = section(ExtenderSettings)
    server: ServerSettings = section(ServerSettings)


# ---------------------------------------------------------------- building


def config_keys(settings_type: type | None = None, prefix: str = "") -> Iterator[str]:
    """Every key of the schema as it is written in YAML, dotted (prometheus.url)."""
    for declared in fields(settings_type or Settings):
        dotted = prefix + yaml_name(declared)
        nested = declared.metadata.get("section")
        if nested is not None:
            yield from config_keys(nested, dotted + ".")
        else:
            yield dotted


def _build(path: str, target: type, raw: Any) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        where = f"config key {path}" if path else "config file"
        raise ConfigError(f"{where}: expected a map of keys, got {raw!r}")
    declared = {yaml_name(f): f for f in fields(target)}
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        dotted = f"{path}.{unknown[0]}" if path else str(unknown[0])
        raise ConfigError(
            f"unknown config key {dotted}; known keys here are {', '.join(sorted(declared))}"
        )
    built: dict[str, Any] = {}
    for name, declaration in declared.items():
        if name not in raw:
            continue
        dotted = f"{path}.{name}" if path else name
        nested = declaration.metadata.get("section")
        if nested is not None:
            built[declaration.name] = _build(dotted, nested, raw[name])
        else:
            built[declaration.name] = declaration.metadata["parse"](dotted, raw[name])
    return target(**built)


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
    settings: Settings = _build("", Settings, raw)
    _cross_checks(settings)
    return settings
