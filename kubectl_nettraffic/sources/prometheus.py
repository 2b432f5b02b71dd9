"""Per-node network traffic from node_exporter counters in Prometheus.

One instant query per refresh fetches every signal for every node (receive
rate, transmit rate, link speed and, in ``uname`` mode, the instance ->
nodename join), each tagged with a ``nettraffic_signal`` label so the answer
can be split apart here. Cost is constant in queries, linear in series.

Deliberate behaviours (each has a test):

- Counter resets: ``rate()`` already handles them; we never use
  ``sum_over_time`` or ``delta`` on a counter.
- NaN / ±Inf samples: that exporter is dropped and reported (a receive rate
  without its transmit rate would understate the node); a node left with no
  exporter has no data.
- Two exporters for one node (duplicate series, e.g. a DaemonSet and a static
  scrape): they measure the same NIC, so the node takes the highest of them
  (never the sum, which would double its traffic) and is reported.
- Empty answer (no traffic series at all): a SourceError, so the scoreboard
  falls back to metrics-server rather than calling every node idle.
- Series whose instance maps to no known node, and nodes with no series, are
  listed in the report.
"""

import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import requests

from kubectl_nettraffic.config import PrometheusSettings
from kubectl_nettraffic.errors import SourceError
from kubectl_nettraffic.kube.nodes import Node
from kubectl_nettraffic.scoring.readings import NodeTraffic
from kubectl_nettraffic.units import promql_duration

SIGNAL_LABEL = "nettraffic_signal"


@dataclass(frozen=True)
class TrafficReport:
    by_node: Mapping[str, NodeTraffic]
    unmapped_series: tuple[str, ...]  # exporter identities that match no node
    nodes_without_series: tuple[str, ...]
    duplicate_exporters: Mapping[str, tuple[str, ...]]
    non_finite: tuple[str, ...]  # exporter identities with NaN/Inf values
    evaluated_at: float


def _promql_string(text: str) -> str:
    """Quote ``text`` as a PromQL double-quoted string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_query(settings: PrometheusSettings) -> str:
    """The single PromQL query for a refresh (see the module docstring)."""
    matchers = (
        [f"device!~{_promql_string(settings.device_exclude)}"] if settings.device_exclude else []
    )
    if settings.device_include:
        matchers.append(f"device=~{_promql_string(settings.device_include)}")
    selector = "{" + ",".join(matchers) + "}"
    window = promql_duration(settings.window)
    node_label = (
        settings.node_match.removeprefix("label:")
        if settings.node_match.startswith("label:")
        else None
    )
    group = f"{node_label}, instance, job" if node_label else "instance, job"

    def tagged(expression: str, signal: str) -> str:
        return f'label_replace({expression}, "{SIGNAL_LABEL}", "{signal}", "", "")'

    parts = [
        tagged(
            f"sum by ({group}) (rate(node_network_receive_bytes_total{selector}[{window}]))", "rx"
        ),
        tagged(
            f"sum by ({group}) (rate(node_network_transmit_bytes_total{selector}[{window}]))", "tx"
        ),
        tagged(f"sum by ({group}) (node_network_speed_bytes{selector} > 0)", "speed"),
    ]
    if settings.node_match == "uname":
        parts.append(tagged("max by (instance, job, nodename) (node_uname_info)", "uname"))
    return "\nor ".join(parts)


def _host_of(instance: str) -> str:
    """``10.0.0.1:9100`` -> ``10.0.0.1``; ``[fd00::1]:9100`` -> ``fd00::1``."""
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


class PrometheusSource:
    """Queries Prometheus; one ``fetch`` per refresh.

    ``session`` and ``clock`` are injectable so tests and benchmarks can count
    requests or evaluate at the time their data was written.
    """

    def __init__(
        self,
        settings: PrometheusSettings,
        session: requests.Session | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not settings.url:
            raise SourceError("prometheus.url is empty; set it or use metrics-server alone")
        self.settings = settings
        self.query = build_query(settings)
        self.session = session or requests.Session()
        self.clock = clock
        self.session.headers.update(dict(settings.headers))

    def _auth_headers(self) -> dict[str, str]:
        if not self.settings.bearer_token_file:
            return {}
        # Re-read each time: projected service-account tokens rotate on disk.
        try:
            with open(self.settings.bearer_token_file, encoding="utf-8") as handle:
                return {"Authorization": f"Bearer {handle.read().strip()}"}
        except OSError as error:
            raise SourceError(
                f"cannot read prometheus.bearerTokenFile {self.settings.bearer_token_file!r}: "
                f"{error.strerror}; check the path or mount"
            ) from None

    def _verify(self) -> bool | str:
        if self.settings.insecure_skip_verify:
            return False
        return self.settings.ca_file or True

    def query_vector(
        self, query: str, at: float | None = None, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """Run an instant query; return the ``result`` list of a vector answer.
        ``timeout``: this query's own, else ``prometheus.timeout``."""
        timeout = self.settings.timeout if timeout is None else timeout
        url = f"{self.settings.url}/api/v1/query"
        data = {"query": query, "time": f"{self.clock() if at is None else at:.3f}"}
        try:
            response = self.session.post(
                url,
                data=data,
                headers=self._auth_headers(),
                timeout=timeout,
                verify=self._verify(),
            )
        except requests.Timeout:
            raise SourceError(
                f"Prometheus at {self.settings.url} did not answer within "
                f"{timeout:g}s; check prometheus.url or raise its timeout",
                "timeout",
            ) from None
        except requests.exceptions.SSLError as error:
            raise SourceError(
                f"TLS to Prometheus at {self.settings.url} failed ({error.__class__.__name__}); "
                "set prometheus.caFile to its CA",
                "tls",
            ) from None
        except requests.RequestException as error:
            raise SourceError(
                f"Prometheus at {self.settings.url} is unreachable "
                f"({error.__class__.__name__}); check prometheus.url",
                "unreachable",
            ) from None
        try:
            body = json.loads(response.content)  # bytes: UTF-8 per RFC 8259, detected by json
        except ValueError:  # UnicodeDecodeError included
            body = None
        if (
            response.status_code != 200
            or not isinstance(body, dict)
            or body.get("status") != "success"
        ):
            detail = body.get("error") if isinstance(body, dict) else response.text[:200].strip()
            hint = {
                401: "; check prometheus.bearerTokenFile",
                403: "; check prometheus.bearerTokenFile and the tenant header",
                404: "; check prometheus.url (it should be the server root, not /graph)",
            }.get(response.status_code, "")
            raise SourceError(
                f"Prometheus at {self.settings.url} answered HTTP {response.status_code}: "
                f"{detail}{hint}",
                "http",
            )
        data_part = body.get("data") or {}
        if data_part.get("resultType") != "vector" or not isinstance(data_part.get("result"), list):
            raise SourceError(
                f"Prometheus at {self.settings.url} answered a {data_part.get('resultType')!r} "
                "where an instant vector was expected; is it a Prometheus-compatible API?",
                "malformed",
            )
        return list(data_part["result"])

    def fetch(self, nodes: Sequence[Node]) -> TrafficReport:
        """Query once and attribute every series to a node."""
        evaluated_at = self.clock()
        result = self.query_vector(self.query, at=evaluated_at)
        return attribute(result, nodes, self.settings, evaluated_at, self.settings.url)


def _exporter_id(metric: Mapping[str, str], node_label: str | None) -> str:
    identity = metric.get("instance", "")
    if node_label:
        identity = f"{metric.get(node_label, '')}/{identity}"
    job = metric.get("job")
    return f"{identity} (job {job})" if job else identity


class _Split(NamedTuple):
    """The tagged answer of ``build_query``, by signal."""

    uname: dict[tuple[str, str], str]  # (instance, job) -> nodename
    uname_by_instance: dict[str, str]  # when the uname series has another job
    signals: dict[str, dict[str, float]]  # exporter id -> signal -> value
    node_keys: dict[str, tuple[str, str]]  # exporter id -> (its node key, job)
    non_finite: set[str]  # exporter ids with a NaN, infinite or negative value


def _split(result: Sequence[Mapping[str, Any]], node_label: str | None) -> _Split:
    split = _Split({}, {}, {}, {}, set())
    uname, uname_by_instance, signals = split.uname, split.uname_by_instance, split.signals
    exporter_node_key, non_finite = split.node_keys, split.non_finite
    for series in result:
        metric = series.get("metric") or {}
        signal = metric.get(SIGNAL_LABEL)
        if signal == "uname":
            uname[(metric.get("instance", ""), metric.get("job", ""))] = metric.get("nodename", "")
            uname_by_instance[metric.get("instance", "")] = metric.get("nodename", "")
            continue
        if signal not in ("rx", "tx", "speed"):
            continue
        try:
            value = float(series["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            value = math.nan
        exporter = _exporter_id(metric, node_label)
        exporter_node_key[exporter] = (
            metric.get(node_label, "") if node_label else metric.get("instance", ""),
            metric.get("job", ""),
        )
        if not math.isfinite(value) or value < 0:
            non_finite.add(exporter)
            continue
        signals.setdefault(exporter, {})[signal] = value
    return split


def _merged(
    per_node: Mapping[str, list[tuple[str, dict[str, float]]]],
) -> tuple[dict[str, NodeTraffic], dict[str, tuple[str, ...]]]:
    """One NodeTraffic per node; several exporters of one node measure the
    same NIC, so it takes the highest of them (never the sum), reported."""
    by_node: dict[str, NodeTraffic] = {}
    duplicates: dict[str, tuple[str, ...]] = {}
    for name, exporters in per_node.items():
        if len(exporters) > 1:
            duplicates[name] = tuple(exporter for exporter, _ in exporters)
        speeds = [v["speed"] for _, v in exporters if v.get("speed", 0) > 0]
        by_node[name] = NodeTraffic(
            receive=max(v.get("rx", 0.0) for _, v in exporters),
            transmit=max(v.get("tx", 0.0) for _, v in exporters),
            link_speed=max(speeds) if speeds else None,
            exporters=tuple(exporter for exporter, _ in exporters),
        )
    return by_node, duplicates


def attribute(
    result: Sequence[Mapping[str, Any]],
    nodes: Sequence[Node],
    settings: PrometheusSettings,
    evaluated_at: float,
    origin: str,
) -> TrafficReport:
    """Split the tagged answer of ``build_query`` into per-node traffic (pure)."""
    node_label = (
        settings.node_match.removeprefix("label:")
        if settings.node_match.startswith("label:")
        else None
    )
    known = {node.name for node in nodes}
    by_ip = {ip: node.name for node in nodes for ip in node.internal_ips}

    split = _split(result, node_label)
    uname, uname_by_instance = split.uname, split.uname_by_instance
    signals, exporter_node_key, non_finite = split.signals, split.node_keys, split.non_finite

    for exporter in non_finite:  # half-broken exporters are not trusted at all
        signals.pop(exporter, None)
    if not signals and not non_finite:
        raise SourceError(
            f"Prometheus at {origin} has no node_network_*_bytes_total series for the devices "
            f"selected (exclude {settings.device_exclude!r}, include {settings.device_include!r}); "
            "check that node_exporter is scraped and the device regexes"
        )

    def node_of(exporter: str) -> str | None:
        key, job = exporter_node_key[exporter]
        if node_label:
            name = key
        elif settings.node_match == "uname":
            name = uname.get((key, job)) or uname_by_instance.get(key, "")
        else:
            name = by_ip.get(_host_of(key), "")
        return name if name in known else None

    per_node: dict[str, list[tuple[str, dict[str, float]]]] = {}
    unmapped: list[str] = []
    for exporter in sorted(exporter_node_key):
        name = node_of(exporter)
        if name is None:
            claimed = (
                uname_by_instance.get(exporter_node_key[exporter][0]) if not node_label else None
            )
            # Say which name it claimed: that is what the operator will look for.
            unmapped.append(f"{exporter}, nodename {claimed}" if claimed else exporter)
            continue
        values = signals.get(exporter)
        if values and ("rx" in values or "tx" in values):
            per_node.setdefault(name, []).append((exporter, values))

    by_node, duplicates = _merged(per_node)
    return TrafficReport(
        by_node=by_node,
        unmapped_series=tuple(unmapped),
        nodes_without_series=tuple(sorted(known - set(by_node))),
        duplicate_exporters=duplicates,
        non_finite=tuple(sorted(non_finite)),
        evaluated_at=evaluated_at,
    )
