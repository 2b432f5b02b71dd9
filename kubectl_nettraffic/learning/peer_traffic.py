"""Who talks to whom: the bytes/s between pairs of workloads, from the flow
metrics users already scrape, in one query for the whole cluster.

Sources (``peers.source``):

- ``istio``, sidecar and ambient: ``istio_tcp_sent_bytes_total`` and
  ``istio_tcp_received_bytes_total`` (TCP), ``istio_request_bytes_sum`` and
  ``istio_response_bytes_sum`` (HTTP), by ``source_workload``,
  ``source_workload_namespace``, ``destination_workload`` and
  ``destination_workload_namespace``, of one ``reporter`` (``peers.reporter``,
  ``source`` by default) so that nothing counts twice. Names as the proxy's
  stats filter writes them (istio/proxy,
  source/extensions/filters/http/istio_stats/istio_stats.cc);
- ``linkerd``: ``tcp_write_bytes_total`` and ``tcp_read_bytes_total`` of
  the outbound side's connection to the server (``direction="outbound"``,
  ``peer="dst"``), by ``namespace`` and the workload kind's label
  (``deployment``, ``statefulset``, ...) and their ``dst_`` twins. Names as
  the proxy writes them (linkerd2-proxy, linkerd/app/core/src/metrics.rs,
  ``prefix_labels("dst", ...)``) and linkerd-viz's scrape config maps the
  injector's ``linkerd.io/proxy-<kind>`` pod labels (linkerd2,
  viz/charts/linkerd-viz/templates/prometheus.yaml);
- ``beyla``: Grafana Beyla's ``beyla_network_flow_bytes_total``, by
  ``k8s_src_owner_name``, ``k8s_src_namespace``, ``k8s_dst_owner_name`` and
  ``k8s_dst_namespace`` (grafana/beyla, pkg/export/attributes/metric.go and
  names/attrs.go);
- ``obi``: OpenTelemetry's eBPF Instrumentation, Beyla's successor:
  ``obi_network_flow_bytes_total`` with the same attributes
  (open-telemetry/opentelemetry.io, content/en/docs/zero-code/obi/network/
  config.md: the ``obi_network_flow_bytes`` metric and its
  ``k8s.src.owner.name`` ... attributes, exported to Prometheus with dots
  as underscores and counters ending ``_total``);
- ``query``: a query of the user's own (``peers.query``) whose series carry
  the four labels named by ``peers.labels``.

A pair is the sum of both directions: what a pod of one sends to the other
and receives from it crosses the same links. Which end calls the other is
kept apart (``PeerReport.calls``): the called end's Services decide where
the caller's connections go (learning/conversations.py,
``Conversations.route``). So are the bytes each way (``PeerReport.sent``)
where the source tells them: with ``peers.bytesEachWay``, Istio's and
Linkerd's series are tagged ``nettraffic_way`` (``to-callee``: the request
bytes, Istio's ``istio_tcp_received_bytes_total`` and
``istio_request_bytes_sum``, Linkerd's outbound ``tcp_write_bytes_total``;
``to-caller``: the rest), the cap is taken on the pair's total and both of
its ways come back; a Beyla or OBI flow series is one way already, from its
source end to its destination end; a ``query`` series says its way by the
same label. Both ends are matched to workloads as
``owner_workload`` names them (kube/workloads.py) by namespace and name
among the workloads the learner knows; a mesh names a Deployment's pods by
the Deployment, a StatefulSet's by the StatefulSet (docs/operations.md,
"Conversations between workloads", has the mapping per source, and
learning/flow_ends.py the sources' own naming rules). What cannot be
matched is counted by reason and left out: a series without the labels,
an unknown end, a workload talking to itself, a rate that is not a finite
number above zero, a name two workload kinds share, and the pairs past
``peers.maxPerWorkload`` (a pair among either end's busiest is kept by both
ends). The answer is bounded by what the cap lets through
(``answer_bound``): every pair is read whole (``bounded_query``: no more
series than the bound, plus one to tell) and cut here, which costs
Prometheus one evaluation of the pairs and keeps exactly each end's
busiest; only where the pairs are more than the bound does the cut start
in Prometheus (``peer_query``): each end's busiest series come back, so a
workload called by thousands does not bring them all, at the price of the
pairs computed twice or more and a pair called both ways ranked by each
direction apart. With ``peers.recordingRule`` both read the pairs from
the chart's recording rule (``PAIRS_RULE``, the same expression evaluated
by Prometheus on its own schedule) instead of computing them at each read.
"""

import json
import logging
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubectl_nettraffic.config import PeerLabelSettings, PeerSettings
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.flow_ends import WorkloadNames
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.units import promql_duration

log = logging.getLogger(__name__)

ISTIO_BYTES = (
    "istio_tcp_sent_bytes_total",
    "istio_tcp_received_bytes_total",
    "istio_request_bytes_sum",
    "istio_response_bytes_sum",
)
# The label telling a series' way, and its values: bytes from the caller
# (the source end) to the callee, or back.
WAY = "nettraffic_way"
TO_CALLEE, TO_CALLER = "to-callee", "to-caller"
# Each metric's way. Istio: the destination receives the request bytes and
# sends the response bytes (istio/proxy istio_stats.cc's metric
# descriptions); Linkerd: the client's outbound proxy writes to the server
# and reads its answers.
WAYS = {
    "istio_tcp_sent_bytes_total": TO_CALLER,
    "istio_tcp_received_bytes_total": TO_CALLEE,
    "istio_request_bytes_sum": TO_CALLEE,
    "istio_response_bytes_sum": TO_CALLER,
    "tcp_write_bytes_total": TO_CALLEE,
    "tcp_read_bytes_total": TO_CALLER,
}
WAYS_TAGGED = ("istio", "linkerd")  # the sources whose pair rates carry WAY
ISTIO_LABELS = PeerLabelSettings()  # the defaults are Istio's names
# The recording rule holding ``pair_rates`` (charts/nettraffic, the
# nettraffic.pairsGroup template; a test holds the two expressions equal).
PAIRS_RULE = "nettraffic:workload_pairs:bytes_per_second"
WAYPOINT = "waypoint"  # the reporter of an ambient waypoint's series (istio_stats.cc)

LINKERD_BYTES = ("tcp_write_bytes_total", "tcp_read_bytes_total")
# The label a Linkerd series names its workload by, per kind, as linkerd2's
# KindToL5DLabel (pkg/k8s) and viz's scrape config write it.
LINKERD_KINDS = (
    "deployment",
    "statefulset",
    "daemonset",
    "replicaset",
    "k8s_job",
    "cronjob",
    "replicationcontroller",
)
# Linkerd's kinds coalesced into one label per end (PromQL, in the query).
LINKERD_LABELS = PeerLabelSettings(
    source_workload="nettraffic_source_workload",
    source_namespace="namespace",
    destination_workload="nettraffic_destination_workload",
    destination_namespace="dst_namespace",
)
BEYLA_BYTES = "beyla_network_flow_bytes_total"
OBI_BYTES = "obi_network_flow_bytes_total"
BEYLA_LABELS = PeerLabelSettings(
    source_workload="k8s_src_owner_name",
    source_namespace="k8s_src_namespace",
    destination_workload="k8s_dst_owner_name",
    destination_namespace="k8s_dst_namespace",
)


@dataclass(frozen=True)
class AgentLabels:
    """What Beyla and OBI add to a flow beside its ends: each end's owner
    type (on by default in OBI, ``attributes.select`` in Beyla), and, where
    selected, the IP of the agent that saw the flow and of the source pod's
    node. Each node's agent reports the flows through its node, so a flow
    between two nodes is reported twice (grafana/beyla and OBI, the
    ``beyla.ip`` / ``obi.ip`` and ``k8s.src.node.ip`` attributes of
    pkg/export/attributes/names): only the source node's agent's series is
    kept where both IPs are there."""

    agent_ip: str
    source_type: str = "k8s_src_owner_type"
    destination_type: str = "k8s_dst_owner_type"
    source_node_ip: str = "k8s_src_node_ip"

    def by(self) -> str:
        return ", ".join(
            (self.source_type, self.destination_type, self.agent_ip, self.source_node_ip)
        )


AGENT_LABELS = {"beyla": AgentLabels("beyla_ip"), "obi": AgentLabels("obi_ip")}


def _by(labels: PeerLabelSettings) -> str:
    return ", ".join(
        (
            labels.source_workload,
            labels.source_namespace,
            labels.destination_workload,
            labels.destination_namespace,
        )
    )


def _tagged(rates: str, name: str, each_way: bool) -> str:
    # Each metric's rates tagged apart before they are joined with ``or``:
    # rate() drops the name, and two metrics' series would share a label
    # set. Then, ``each_way``, tagged with the metric's way, kept through
    # the sum.
    parted = f'label_replace({rates}, "nettraffic_part", "{name}", "", "")'
    return f'label_replace({parted}, "{WAY}", "{WAYS[name]}", "", "")' if each_way else parted


def _coalesced(vector: str, into: str, labels: Iterable[str]) -> str:
    """``vector`` with ``into`` set from whichever of ``labels`` is set."""
    for label in labels:
        vector = f'label_replace({vector}, "{into}", "$1", "{label}", "(.+)")'
    return vector


def _linkerd_rates(name: str, window_text: str, cluster: str = "") -> str:
    matchers = 'direction="outbound", peer="dst"' + (f", {cluster}" if cluster else "")
    dst_kinds = [f"dst_{kind}" for kind in LINKERD_KINDS]
    # Summed by the kinds' labels first: label_replace then runs once per
    # pair instead of once per series (a proxy's series are per target
    # address, TLS and more).
    by = ", ".join(("namespace", "dst_namespace", *LINKERD_KINDS, *dst_kinds))
    rates = f"sum by ({by}) (rate({name}{{{matchers}}}[{window_text}]))"
    rates = _coalesced(rates, LINKERD_LABELS.source_workload, LINKERD_KINDS)
    return _coalesced(rates, LINKERD_LABELS.destination_workload, dst_kinds)


# The label that names a series' cluster, where the source writes one, and
# a metric of the source that carries it: Istio's source_cluster tag
# (istio/proxy, source/extensions/filters/http/istio_stats/istio_stats.cc),
# Beyla's k8s.cluster.name attribute, reported by default on its network
# flows (grafana.com/docs/beyla, network), and OBI's, the same.
CLUSTER_LABELS = {
    "istio": ("source_cluster", ISTIO_BYTES[0]),
    "beyla": ("k8s_cluster_name", BEYLA_BYTES),
    "obi": ("k8s_cluster_name", OBI_BYTES),
}


def clusters_in(prometheus: PrometheusSource, settings: PeerSettings) -> list[str]:
    """The clusters whose flow series the source's metric holds, by name."""
    label, metric = CLUSTER_LABELS.get(settings.source, ("", ""))
    if not label:
        return []
    answer = prometheus.query_vector(f"count by ({label}) ({metric})")
    return sorted({str((s.get("metric") or {}).get(label) or "") for s in answer} - {""})


def _cluster_matcher(settings: PeerSettings) -> str:
    """``peers.cluster`` as a matcher to add to a selector ("" for none)."""
    if not settings.cluster:
        return ""
    label, _, value = settings.cluster.partition("=")
    return f"{label}={json.dumps(value)}"  # a JSON string is a PromQL string


def unselected_cluster(settings: PeerSettings) -> str:
    """The source's cluster label where ``peers.cluster`` selects none: kept
    in the answer, so that the series of several clusters are told apart
    and left out rather than summed ("" where there is nothing to tell)."""
    return "" if settings.cluster else CLUSTER_LABELS.get(settings.source, ("", ""))[0]


def pair_rates(settings: PeerSettings, window: float) -> str | None:
    """Every pair's bytes/s, one series per (source end, destination end),
    and per way with ``peers.bytesEachWay`` where the source tells it
    (``WAY``), uncapped; None without a source."""
    each_way = settings.bytes_each_way
    way = f", {WAY}" if each_way else ""
    window_text = promql_duration(window)
    cluster = _cluster_matcher(settings)
    unselected = unselected_cluster(settings)
    if settings.source == "istio":
        # An ambient waypoint's series name the ends ztunnel's legs hide.
        reporters = (
            settings.reporter
            if settings.reporter == WAYPOINT
            else f"{settings.reporter}|{WAYPOINT}"
        )
        matchers = ", ".join(m for m in (f'reporter=~"{reporters}"', cluster) if m)
        by = ", ".join(label for label in (_by(ISTIO_LABELS), unselected) if label)
        parts = [
            _tagged(f"sum by ({by}) (rate({name}{{{matchers}}}[{window_text}]))", name, each_way)
            for name in ISTIO_BYTES
        ]
        return f"sum by ({by}{way}) ({' or '.join(parts)})"
    if settings.source == "linkerd":
        parts = [
            _tagged(_linkerd_rates(name, window_text, cluster), name, each_way)
            for name in LINKERD_BYTES
        ]
        return f"sum by ({_by(LINKERD_LABELS)}{way}) ({' or '.join(parts)})"
    if settings.source in AGENT_LABELS:
        flows = BEYLA_BYTES if settings.source == "beyla" else OBI_BYTES
        by = ", ".join(
            label
            for label in (_by(BEYLA_LABELS), AGENT_LABELS[settings.source].by(), unselected)
            if label
        )
        return f"sum by ({by}) (rate({flows}{{{cluster}}}[{window_text}]))"
    if settings.source == "query" and settings.query:
        return settings.query
    return None


def peer_query(settings: PeerSettings, window: float, recorded: bool = False) -> str | None:
    """The pairs as the learner reads them: ``pair_rates`` cut in Prometheus
    to each workload's ``peers.maxPerWorkload`` busiest series as the source
    end and as the destination end, so the answer grows with the workloads,
    not with the pairs; ``recorded``: the rates from the recording rule;
    None without a source."""
    rates = _rates(settings, window, recorded)
    if rates is None:
        return None
    labels, most = labels_of(settings), _most_series(settings)
    source_end = f"{labels.source_workload}, {labels.source_namespace}"
    destination_end = f"{labels.destination_workload}, {labels.destination_namespace}"
    if settings.source not in WAYS_TAGGED or not settings.bytes_each_way:
        # A series among either end's busiest comes back once (``or`` keeps
        # one of two equal label sets).
        return (
            f"topk by ({source_end}) ({most}, {rates}) "
            f"or topk by ({destination_end}) ({most}, {rates})"
        )
    # The cut is taken on each pair's total, and both ways of a pair kept
    # come back: a cut per way would keep one way of a pair and not the
    # other. (PromQL has no shared subexpression: the rates are evaluated
    # once more than without the ways.)
    total = f"sum without ({WAY}) ({rates})"
    return (
        f"{rates} and ignoring ({WAY}) (topk by ({source_end}) ({most}, {total}) "
        f"or topk by ({destination_end}) ({most}, {total}))"
    )


def _rates(settings: PeerSettings, window: float, recorded: bool) -> str | None:
    """``pair_rates``, or the recording rule holding them (``recorded``)."""
    rates = pair_rates(settings, window)
    return PAIRS_RULE if recorded and rates is not None else rates


def _most_series(settings: PeerSettings) -> int:
    """The series of each end's busiest pairs the cut keeps per end."""
    if settings.source in AGENT_LABELS:
        return 2 * settings.max_per_workload  # a flow between nodes comes from each node's agent
    return settings.max_per_workload


def answer_bound(settings: PeerSettings, workloads: int) -> int:
    """The most series ``peer_query`` returns for ``workloads`` ends: each
    end's busiest as the source end and as the destination end, a series
    each way where the source tells the ways."""
    ways = 2 if settings.source in WAYS_TAGGED and settings.bytes_each_way else 1
    return 2 * _most_series(settings) * ways * workloads


def bounded_query(
    settings: PeerSettings, window: float, bound: int, recorded: bool = False
) -> str | None:
    """Every pair's series, ``bound`` + 1 at most: an answer of ``bound`` or
    fewer holds them all. One evaluation of the pairs (``topk`` of more than
    the series costs what the pairs do: bench.peer_learning --flows-only)."""
    rates = _rates(settings, window, recorded)
    return None if rates is None else f"topk({bound + 1}, {rates})"


def labels_of(settings: PeerSettings) -> PeerLabelSettings:
    """The labels naming a pair's ends in the source's query."""
    return {
        "linkerd": LINKERD_LABELS,
        "beyla": BEYLA_LABELS,
        "obi": BEYLA_LABELS,
        "query": settings.labels,
    }.get(settings.source, ISTIO_LABELS)


@dataclass
class PeerReport:
    """workload -> its peers and the bytes/s between them, busiest first;
    and what was left out, by reason."""

    peers: dict[Workload, list[tuple[Workload, float]]] = field(default_factory=dict)
    ignored: Counter[str] = field(default_factory=Counter)
    dropped: dict[Workload, int] = field(default_factory=dict)  # pairs past the cap
    # (source end, destination end) of every series kept: who calls whom,
    # where the source says so (a flow source counting each direction of a
    # connection apart names both ends as sources).
    calls: set[tuple[Workload, Workload]] = field(default_factory=set)
    series: int = 0  # in the answer, kept or not
    # Beyla's or OBI's series without the agent's and the source node's IPs:
    # a flow between two nodes among them may be counted by both agents.
    agent_unknown: int = 0
    # peers.recordingRule is on, but Prometheus held no recorded pair while
    # the flow metrics held some: these were read from the flow metrics.
    rule_missing: bool = False
    # More pairs than answer_bound lets through: each end's busiest were cut
    # in Prometheus (peer_query), not every pair read and cut here.
    cut_in_prometheus: bool = False
    # (from, to) -> the bytes/s the first end sends the second, for the
    # pairs whose source tells the way (``WAY``); the two ways of a pair
    # add up to its figure in ``peers``.
    sent: dict[tuple[Workload, Workload], float] = field(default_factory=dict)


def peers_from(
    result: list[dict[str, Any]],
    known: Iterable[Workload],
    most_per_workload: int,
    labels: PeerLabelSettings = ISTIO_LABELS,
    agents: AgentLabels | None = None,
    waypoints: frozenset[tuple[str, str]] = frozenset(),
    cluster_label: str = "",
) -> PeerReport:
    """The pairs in a query's ``result``, matched to the ``known``
    workloads; ``agents``: Beyla's or OBI's labels beside the ends (each of
    their series is one way, from its source end);
    ``waypoints``: (namespace, name) of ends that are a leg through an Istio
    waypoint, whose own series name the real ends; ``cluster_label``: the
    label naming each series' cluster where none is selected: with several
    clusters' series, every series is left out (``several-clusters``), as
    same-named workloads of different clusters cannot be told apart."""
    names = WorkloadNames(known)
    report = PeerReport(series=len(result))
    if cluster_label:
        clusters = {(s.get("metric") or {}).get(cluster_label) for s in result} - {None, ""}
        if len(clusters) > 1:
            report.ignored["several-clusters"] = len(result)
            return report
    pairs = _Pairs()
    # The ends of the series with a rate, and of the ways that carry nothing.
    heard: set[tuple[tuple[Any, Any], tuple[Any, Any]]] = set()
    silent: dict[tuple[tuple[Any, Any], tuple[Any, Any]], int] = {}
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        ends = (
            (metric.get(labels.source_namespace), metric.get(labels.source_workload)),
            (metric.get(labels.destination_namespace), metric.get(labels.destination_workload)),
        )
        if not all(namespace and name for namespace, name in ends):
            report.ignored["no-workload-labels"] += 1
            continue
        if waypoints and any((str(ns), str(name)) in waypoints for ns, name in ends):
            report.ignored["waypoint-leg"] += 1
            continue
        try:
            rate = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            rate = math.nan
        if rate == 0 and metric.get(WAY) in (TO_CALLEE, TO_CALLER):
            # One way of a pair may carry nothing (a push, a download):
            # no rate only where neither way carries anything.
            silent[ends] = silent.get(ends, 0) + 1
            continue
        if not math.isfinite(rate) or rate <= 0:
            report.ignored["no-rate"] += 1
            continue
        heard.add(ends)
        types = ("", "")
        if agents is not None:
            seen_by, sent_from = metric.get(agents.agent_ip), metric.get(agents.source_node_ip)
            if seen_by and sent_from and seen_by != sent_from:
                report.ignored["other-agent"] += 1  # the source node's agent counts it
                continue
            report.agent_unknown += not (seen_by and sent_from)
            types = (
                str(metric.get(agents.source_type) or ""),
                str(metric.get(agents.destination_type) or ""),
            )
        found = [
            names.find(str(namespace), str(name), owner_type)
            for (namespace, name), owner_type in zip(ends, types, strict=True)
        ]
        first, second = found
        if not isinstance(first, Workload) or not isinstance(second, Workload):
            # The first end's reason where both fail, as a series is counted once.
            report.ignored[first if isinstance(first, str) else str(second)] += 1
            continue
        if first == second:
            report.ignored["self"] += 1
            continue
        report.calls.add((first, second))
        pairs.add(first, second, rate, TO_CALLEE if agents is not None else metric.get(WAY))
    idle = sum(n for ends, n in silent.items() if ends not in heard)
    if idle:
        report.ignored["no-rate"] += idle
    pairs.cut(most_per_workload, report)
    return report


def _pair(one: Workload, other: Workload) -> tuple[Workload, Workload]:
    return (one, other) if one < other else (other, one)


class _Pairs:
    """The matched series summed per pair, and per way where told."""

    def __init__(self) -> None:
        self.rates: dict[tuple[Workload, Workload], float] = {}
        self.sent: dict[tuple[Workload, Workload], float] = {}  # (from, to)
        self.way_unknown: set[tuple[Workload, Workload]] = set()

    def add(self, source: Workload, destination: Workload, rate: float, way: str | None) -> None:
        pair = _pair(source, destination)
        self.rates[pair] = self.rates.get(pair, 0.0) + rate
        if way in (TO_CALLEE, TO_CALLER):
            sender = (source, destination) if way == TO_CALLEE else (destination, source)
            self.sent[sender] = self.sent.get(sender, 0.0) + rate
        else:
            self.way_unknown.add(pair)

    def cut(self, most_per_workload: int, report: PeerReport) -> None:
        """Each workload's busiest pairs into ``report``: a pair among either
        end's busiest is kept by both, as each side pulls toward the other
        and a pair's bytes are counted once wherever shown."""
        listed: dict[Workload, list[tuple[Workload, float]]] = {}
        for (first, second), rate in self.rates.items():
            listed.setdefault(first, []).append((second, rate))
            listed.setdefault(second, []).append((first, rate))
        kept: set[tuple[Workload, Workload]] = set()
        for workload, peers in listed.items():
            peers.sort(key=lambda peer: (-peer[1], peer[0]))
            kept.update(_pair(workload, peer) for peer, _ in peers[:most_per_workload])
        for workload, peers in listed.items():
            ours = [(peer, rate) for peer, rate in peers if _pair(workload, peer) in kept]
            if len(ours) < len(peers):
                report.dropped[workload] = len(peers) - len(ours)
            report.peers[workload] = ours
        # The ways of the pairs kept where every series of the pair told its
        # way (a user's query may not: those pairs show their total alone).
        report.sent = {
            ends: rate
            for ends, rate in self.sent.items()
            if _pair(*ends) in kept and _pair(*ends) not in self.way_unknown
        }


def read_peers(
    source: PrometheusSource,
    settings: PeerSettings,
    window: float,
    known: Iterable[Workload],
    at: float | None = None,
    waypoints: frozenset[tuple[str, str]] = frozenset(),
    whole_first: bool = True,
) -> PeerReport | None:
    """The pairs as of ``at`` (default now), matched to ``known``; None
    without a flow source. Every pair read whole where they are no more
    than ``answer_bound`` (``whole_first``: tried first), else each end's
    busiest cut in Prometheus (``cut_in_prometheus``). ``waypoints``: Istio
    ambient's waypoints, as (namespace, name), whose legs are left out.
    With ``peers.recordingRule``, the recorded pairs, or the flow metrics
    themselves where none is recorded (``rule_missing``)."""
    known = list(known)
    recorded = settings.recording_rule.enabled
    if pair_rates(settings, window) is None:
        return None
    bound = answer_bound(settings, len(known))
    result, cut = _answer(source, settings, window, recorded, bound, whole_first, at)
    rule_missing = False
    if recorded and not result:
        # No recorded pairs: the rule is not loaded (yet), or there is no
        # pair at all. The flow metrics themselves tell which.
        result, cut = _answer(source, settings, window, False, bound, whole_first, at)
        rule_missing = bool(result)
    report = pairs_in(result, known, settings, waypoints)
    report.rule_missing, report.cut_in_prometheus = rule_missing, cut
    return report


def _answer(
    source: PrometheusSource,
    settings: PeerSettings,
    window: float,
    recorded: bool,
    bound: int,
    whole_first: bool,
    at: float | None,
) -> tuple[list[dict[str, Any]], bool]:
    """The pairs' series, and whether they were cut in Prometheus: read
    whole when ``whole_first`` and no more than ``bound``, else cut there."""
    if whole_first:
        whole = bounded_query(settings, window, bound, recorded)
        assert whole is not None
        result = source.query_vector(whole, at=at)
        if len(result) <= bound:
            return result, False
        log.info(
            "more than %d pair series (peers.maxPerWorkload %d): each end's busiest cut in "
            "Prometheus",
            bound,
            settings.max_per_workload,
        )
    cut = peer_query(settings, window, recorded)
    assert cut is not None
    return source.query_vector(cut, at=at), True


def pairs_in(
    result: list[dict[str, Any]],
    known: Iterable[Workload],
    settings: PeerSettings,
    waypoints: frozenset[tuple[str, str]] = frozenset(),
) -> PeerReport:
    """``peers_from`` with what ``settings``' source gives beside the ends:
    its labels, its agents' labels, its unselected cluster label, the cap."""
    agents = AGENT_LABELS.get(settings.source)
    labels, cluster = labels_of(settings), unselected_cluster(settings)
    return peers_from(result, known, settings.max_per_workload, labels, agents, waypoints, cluster)


class PeerTrafficSource:
    """The learner's flow query, through the node source's client (auth,
    TLS). After an answer past the bound, the next ``CUT_READS_BEFORE_WHOLE``
    reads cut in Prometheus at once, as the pairs rarely shrink by a pass:
    a whole read tried every time would cost one evaluation of every pair
    more each pass."""

    CUT_READS_BEFORE_WHOLE = 8

    def __init__(self, prometheus: PrometheusSource, settings: PeerSettings) -> None:
        self.prometheus = prometheus
        self.settings = settings
        self.cut_reads_left = 0  # before a whole read is tried again

    def read(
        self,
        known: Iterable[Workload],
        at: float,
        waypoints: frozenset[tuple[str, str]] = frozenset(),
    ) -> PeerReport | None:
        window = self.prometheus.settings.window
        whole_first = self.cut_reads_left == 0
        report = read_peers(
            self.prometheus, self.settings, window, known, at, waypoints, whole_first
        )
        if report is None or not report.cut_in_prometheus:
            self.cut_reads_left = 0
        elif whole_first:
            self.cut_reads_left = self.CUT_READS_BEFORE_WHOLE
        else:
            self.cut_reads_left -= 1
        return report
