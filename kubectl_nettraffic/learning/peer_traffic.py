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
- ``query``: a query of the user's own (``peers.query``) whose series carry
  the four labels named by ``peers.labels``.

A pair is the sum of both directions: what a pod of one sends to the other
and receives from it crosses the same links. Both ends are matched to
workloads as ``owner_workload`` names them (kube/workloads.py) by namespace
and name among the workloads the learner knows; a mesh names a Deployment's
pods by the Deployment, a StatefulSet's by the StatefulSet
(docs/operations.md, "Conversations between workloads", has the mapping per
source). What cannot be matched is counted by reason and left out: a series
without the labels, an unknown end, a workload talking to itself, a rate
that is not a finite number above zero, a name two workload kinds share,
and the pairs past ``peers.maxPerWorkload`` (the busiest are kept).
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubectl_nettraffic.config import PeerLabelSettings, PeerSettings
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.sources.prometheus import PrometheusSource
from kubectl_nettraffic.units import promql_duration

ISTIO_BYTES = (
    "istio_tcp_sent_bytes_total",
    "istio_tcp_received_bytes_total",
    "istio_request_bytes_sum",
    "istio_response_bytes_sum",
)
ISTIO_LABELS = PeerLabelSettings()  # the defaults are Istio's names


def _by(labels: PeerLabelSettings) -> str:
    return ", ".join(
        (
            labels.source_workload,
            labels.source_namespace,
            labels.destination_workload,
            labels.destination_namespace,
        )
    )


def peer_query(settings: PeerSettings, window: float) -> str | None:
    """Every pair's bytes/s, both directions, in one instant query; None
    without a source."""
    if settings.source == "istio":
        # Each metric's rates tagged apart before they are joined: rate()
        # drops the name, and two metrics' series would share a label set.
        window_text = promql_duration(window)
        parts = [
            f'label_replace(rate({name}{{reporter="{settings.reporter}"}}[{window_text}]),'
            f' "nettraffic_part", "{name}", "", "")'
            for name in ISTIO_BYTES
        ]
        return f"sum by ({_by(ISTIO_LABELS)}) ({' or '.join(parts)})"
    if settings.source == "query" and settings.query:
        return settings.query
    return None


@dataclass
class PeerReport:
    """workload -> its peers and the bytes/s between them, busiest first;
    and what was left out, by reason."""

    peers: dict[Workload, list[tuple[Workload, float]]] = field(default_factory=dict)
    ignored: Counter[str] = field(default_factory=Counter)
    dropped: dict[Workload, int] = field(default_factory=dict)  # pairs past the cap


def _named(known: Iterable[Workload]) -> dict[tuple[str, str], Workload | None]:
    """(namespace, name) -> the workload; None where two kinds share the name."""
    named: dict[tuple[str, str], Workload | None] = {}
    for workload in known:
        key = (workload.namespace, workload.name)
        named[key] = workload if key not in named else None
    return named


def peers_from(
    result: list[dict[str, Any]],
    known: Iterable[Workload],
    most_per_workload: int,
    labels: PeerLabelSettings = ISTIO_LABELS,
) -> PeerReport:
    """The pairs in a query's ``result``, matched to the ``known`` workloads."""
    named = _named(known)
    report = PeerReport()
    rates: dict[tuple[Workload, Workload], float] = {}
    for series in result:
        metric: Mapping[str, str] = series.get("metric") or {}
        ends = (
            (metric.get(labels.source_namespace), metric.get(labels.source_workload)),
            (metric.get(labels.destination_namespace), metric.get(labels.destination_workload)),
        )
        if not all(namespace and name for namespace, name in ends):
            report.ignored["no-workload-labels"] += 1
            continue
        try:
            rate = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            rate = math.nan
        if not math.isfinite(rate) or rate <= 0:
            report.ignored["no-rate"] += 1
            continue
        workloads = [named.get((str(namespace), str(name)), False) for namespace, name in ends]
        if any(workload is None for workload in workloads):
            report.ignored["ambiguous-workload"] += 1
            continue
        first, second = workloads
        if not isinstance(first, Workload) or not isinstance(second, Workload):
            report.ignored["unknown-workload"] += 1
            continue
        if first == second:
            report.ignored["self"] += 1
            continue
        pair = (first, second) if first < second else (second, first)
        rates[pair] = rates.get(pair, 0.0) + rate
    for (first, second), rate in rates.items():
        report.peers.setdefault(first, []).append((second, rate))
        report.peers.setdefault(second, []).append((first, rate))
    for workload, peers in report.peers.items():
        peers.sort(key=lambda peer: (-peer[1], peer[0]))
        if len(peers) > most_per_workload:
            report.dropped[workload] = len(peers) - most_per_workload
            del peers[most_per_workload:]
    return report


def read_peers(
    source: PrometheusSource,
    settings: PeerSettings,
    window: float,
    known: Iterable[Workload],
    at: float | None = None,
) -> PeerReport | None:
    """One query (as of ``at``, default now), the pairs matched to
    ``known``; None without a flow source."""
    query = peer_query(settings, window)
    if query is None:
        return None
    labels = settings.labels if settings.source == "query" else ISTIO_LABELS
    result = source.query_vector(query, at=at)
    return peers_from(result, known, settings.max_per_workload, labels)


class PeerTrafficSource:
    """The learner's flow query, through the node source's client (auth, TLS)."""

    def __init__(self, prometheus: PrometheusSource, settings: PeerSettings) -> None:
        self.prometheus = prometheus
        self.settings = settings

    def read(self, known: Iterable[Workload], at: float) -> PeerReport | None:
        window = self.prometheus.settings.window
        return read_peers(self.prometheus, self.settings, window, known, at)
