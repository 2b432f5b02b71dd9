"""Istio's standard metrics as a sidecar exports them, as OpenMetrics lines
for promtool's backfill (harness/prometheus.py): one flow between two
workloads, reported by both ends' proxies."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from harness.prometheus import STEP
from tests.harness.kube_series import labels_text


@dataclass(frozen=True)
class Flow:
    source: tuple[str, str]  # (namespace, workload) as Istio names it
    destination: tuple[str, str]
    tcp_sent: float = 0.0  # bytes/s, the destination's answers
    tcp_received: float = 0.0  # bytes/s, the source's requests
    http_request: float = 0.0
    http_response: float = 0.0
    reset_at: float | None = None  # the proxy restarted this long before the end


def ends(flow: Flow, reporter: str) -> dict[str, str]:
    """The labels naming a flow's two ends, as one reporter's proxy writes them."""
    return {
        "reporter": reporter,
        "source_workload": flow.source[1],
        "source_workload_namespace": flow.source[0],
        "destination_workload": flow.destination[1],
        "destination_workload_namespace": flow.destination[0],
    }


def istio_lines(flows: Sequence[Flow], end: float, duration: float = 600) -> Iterator[str]:
    times = [end - duration + i * STEP for i in range(int(duration // STEP) + 1)]
    families = (
        ("istio_tcp_sent_bytes", "counter", "_total", "tcp_sent", "tcp"),
        ("istio_tcp_received_bytes", "counter", "_total", "tcp_received", "tcp"),
        ("istio_request_bytes", "summary", "_sum", "http_request", "http"),
        ("istio_response_bytes", "summary", "_sum", "http_response", "http"),
    )
    for family, kind, suffix, attribute, protocol in families:
        yield f"# TYPE {family} {kind}"
        for flow in flows:
            rate = getattr(flow, attribute)
            if not rate:
                continue
            for reporter in ("source", "destination"):
                labels = ends(flow, reporter) | {
                    "request_protocol": protocol,
                    "connection_security_policy": "mutual_tls",
                }
                for t in times:
                    if flow.reset_at is not None and t > end - flow.reset_at:
                        value = rate * (t - (end - flow.reset_at))
                    else:
                        value = 1e9 + rate * (t - times[0])
                    yield f"{family}{suffix}{labels_text(labels)} {value:.3f} {t:.3f}"
                    if kind == "summary":
                        yield f"{family}_count{labels_text(labels)} {t - times[0]:.0f} {t:.3f}"
