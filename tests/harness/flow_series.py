"""Flow metrics as the meshes and eBPF exporters write them, as OpenMetrics
lines for promtool's backfill (harness/prometheus.py): Istio's (one flow
reported by both ends' proxies), Linkerd's (the client's and the server's
proxy, each side of each proxy) and Grafana Beyla's (each packet direction,
seen by the node agents)."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

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
    # Istio's proxies that report it: both ends' (sidecars, or ztunnel
    # without a waypoint); a waypoint's legs and its own series otherwise.
    reporters: tuple[str, ...] = ("source", "destination")


def ends(flow: Flow, reporter: str) -> dict[str, str]:
    """The labels naming a flow's two ends, as one reporter's proxy writes them."""
    return {
        "reporter": reporter,
        "source_workload": flow.source[1],
        "source_workload_namespace": flow.source[0],
        "destination_workload": flow.destination[1],
        "destination_workload_namespace": flow.destination[0],
    }


def _times(end: float, duration: float) -> list[float]:
    return [end - duration + i * STEP for i in range(int(duration // STEP) + 1)]


def _counter(flow: Flow, rate: float, t: float, start: float, end: float) -> float:
    """A counter growing at ``rate``, restarted ``flow.reset_at`` before the end."""
    if flow.reset_at is not None and t > end - flow.reset_at:
        return rate * (t - (end - flow.reset_at))
    return 1e9 + rate * (t - start)


def istio_lines(flows: Sequence[Flow], end: float, duration: float = 600) -> Iterator[str]:
    times = _times(end, duration)
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
            for reporter in flow.reporters:
                labels = ends(flow, reporter) | {
                    "request_protocol": protocol,
                    "connection_security_policy": "mutual_tls",
                }
                for t in times:
                    value = _counter(flow, rate, t, times[0], end)
                    yield f"{family}{suffix}{labels_text(labels)} {value:.3f} {t:.3f}"
                    if kind == "summary":
                        yield f"{family}_count{labels_text(labels)} {t - times[0]:.0f} {t:.3f}"


def through_waypoint(flow: Flow, waypoint: tuple[str, str]) -> list[Flow]:
    """``flow`` as Istio ambient reports it where the server's Service has a
    waypoint: ztunnel reports the client's leg to the waypoint (both ends'
    ztunnels) and the waypoint's leg to the server (the server's), each
    with the waypoint as the end; the waypoint reports the flow between the
    real ends (``reporter="waypoint"``)."""
    return [
        replace(flow, destination=waypoint),
        replace(flow, source=waypoint, reporters=("destination",)),
        replace(flow, reporters=("waypoint",)),
    ]


def _linkerd_kind(kind: str) -> str:
    # The label Linkerd names a kind by (linkerd2 pkg/k8s KindToL5DLabel).
    return "k8s_job" if kind == "job" else kind


def linkerd_lines(
    flows: Sequence[Flow],
    end: float,
    kinds: dict[str, str],
    duration: float = 600,
    renamed: dict[str, str] | None = None,
) -> Iterator[str]:
    """Each flow's bytes as both proxies count them: the client's outbound
    side to the server (``peer="dst"``, the server named by ``dst_`` labels)
    and to its app (``peer="src"``), and the server's inbound side. A flow's
    TCP and HTTP bytes together, each flow to its own server address;
    ``kinds``: workload -> its kind's label; ``renamed``: workload -> the
    value Linkerd labels it by where that is not Istio's name (an Argo
    Rollout's pods by their ReplicaSet, a DeploymentConfig's by their
    ReplicationController)."""
    times = _times(end, duration)
    renamed = renamed or {}
    for family, client_sends in (("tcp_write_bytes", True), ("tcp_read_bytes", False)):
        yield f"# TYPE {family} counter"
        for number, flow in enumerate(flows):
            sent = flow.tcp_received + flow.http_request  # client -> server
            answered = flow.tcp_sent + flow.http_response
            (src_ns, src), (dst_ns, dst) = flow.source, flow.destination
            src_label, dst_label = renamed.get(src, src), renamed.get(dst, dst)
            client = {"namespace": src_ns, _linkerd_kind(kinds[src]): src_label, "tls": "true"}
            server = {"namespace": dst_ns, _linkerd_kind(kinds[dst]): dst_label, "tls": "true"}
            to_server = {
                "target_addr": f"10.0.0.{number + 1}:8080",
                "dst_namespace": dst_ns,
                "dst_" + _linkerd_kind(kinds[dst]): dst_label,
            }
            series = (
                (client | {"direction": "outbound", "peer": "dst"} | to_server, client_sends),
                (client | {"direction": "outbound", "peer": "src"}, not client_sends),
                (server | {"direction": "inbound", "peer": "src"}, not client_sends),
            )
            for labels, sends in series:
                rate = sent if sends else answered
                for t in times:
                    value = _counter(flow, rate, t, times[0], end)
                    yield f"{family}_total{labels_text(labels)} {value:.3f} {t:.3f}"


def beyla_lines(
    flows: Sequence[Flow],
    end: float,
    owners: dict[str, str],
    duration: float = 600,
    prefix: str = "beyla",
    renamed: dict[str, str] | None = None,
    nodes: dict[str, str] | None = None,
) -> Iterator[str]:
    """Each flow's packets both ways, as the agents report them with their
    default attributes: the requests from client to server, the answers from
    server to client; flows between the same two workloads in one series,
    as an agent aggregates them. ``owners``: workload -> its owner type;
    ``renamed``: workload -> the owner name the agent gives it where that is
    not Istio's (a Job's cut at its last '-'). ``prefix`` "obi": as
    OpenTelemetry's eBPF Instrumentation names them. ``nodes``: workload ->
    its node's IP, with the agent's and the nodes' IP attributes selected:
    a flow between two nodes is reported by both nodes' agents."""
    times = _times(end, duration)
    renamed = renamed or {}
    rates: dict[tuple[tuple[str, str], tuple[str, str], str], tuple[Flow, float]] = {}
    for flow in flows:
        for key, rate in (
            ((flow.source, flow.destination, "request"), flow.tcp_received + flow.http_request),
            ((flow.destination, flow.source, "response"), flow.tcp_sent + flow.http_response),
        ):
            first, before = rates.get(key, (flow, 0.0))
            rates[key] = (first, before + rate)
    yield f"# TYPE {prefix}_network_flow_bytes counter"
    for ((src_ns, src), (dst_ns, dst), direction), (flow, rate) in rates.items():
        if not rate:
            continue  # no packets that way, no series
        labels = {
            "k8s_src_owner_name": renamed.get(src, src),
            "k8s_src_owner_type": owners[src],
            "k8s_src_namespace": src_ns,
            "k8s_dst_owner_name": renamed.get(dst, dst),
            "k8s_dst_owner_type": owners[dst],
            "k8s_dst_namespace": dst_ns,
            "k8s_cluster_name": "test",
            "direction": direction,
        }
        agents: list[dict[str, str]] = [{}]
        if nodes is not None:
            placed = {"k8s_src_node_ip": nodes[src], "k8s_dst_node_ip": nodes[dst]}
            agents = [placed | {f"{prefix}_ip": ip} for ip in dict.fromkeys(placed.values())]
        for agent in agents:
            for t in times:
                value = _counter(flow, rate, t, times[0], end)
                text = labels_text(labels | agent)
                yield f"{prefix}_network_flow_bytes_total{text} {value:.3f} {t:.3f}"
