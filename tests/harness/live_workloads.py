"""cAdvisor, kube-state-metrics and Istio series for a few pods and the flows
between their workloads, served live (counters growing in real time) for a
Prometheus to scrape: what a running webhook's learner reads with a flow
source (tests/e2e). Shapes as tests/harness/kube_series.py and
flow_series.py write them for backfill."""

import time
from collections.abc import Sequence

from harness.exporter import serve_metrics
from tests.harness.flow_series import Flow, ends
from tests.harness.kube_series import PodSeries, ReplicaSetSeries, labels_text


class LiveWorkloads:
    def __init__(
        self,
        pods: Sequence[PodSeries],
        replicasets: Sequence[ReplicaSetSeries],
        flows: Sequence[Flow],
    ) -> None:
        self.pods, self.replicasets, self.flows = pods, replicasets, flows
        self.started = time.time()
        self.server = serve_metrics(self.render)
        self.target = f"127.0.0.1:{self.server.server_address[1]}"

    def render(self) -> bytes:
        elapsed = time.time() - self.started
        lines = []
        for family, attribute in (
            ("container_network_receive_bytes_total", "rx"),
            ("container_network_transmit_bytes_total", "tx"),
        ):
            lines.append(f"# TYPE {family} counter")
            for pod in self.pods:
                labels = {"container": "", "interface": "eth0", "namespace": pod.namespace}
                labels |= {"pod": pod.pod, "node": pod.node}
                lines.append(
                    f"{family}{labels_text(labels)} {1e9 + getattr(pod, attribute) * elapsed:.0f}"
                )
        for pod in self.pods:
            named = {"namespace": pod.namespace, "pod": pod.pod}
            owner = {"owner_kind": pod.owner_kind, "owner_name": pod.owner_name}
            lines.append(
                f"kube_pod_owner{labels_text(named | owner | {'owner_is_controller': 'true'})} 1"
            )
            info = named | {"node": pod.node, "host_network": "false"}
            lines.append(f"kube_pod_info{labels_text(info)} 1")
            lines.append(f"kube_pod_created{labels_text(named)} {self.started - 3600:.0f}")
        for rs in self.replicasets:
            labels = {"namespace": rs.namespace, "replicaset": rs.replicaset}
            labels |= {"owner_kind": rs.owner_kind, "owner_name": rs.owner_name}
            lines.append(
                f"kube_replicaset_owner{labels_text(labels | {'owner_is_controller': 'true'})} 1"
            )
        for family, attribute in (
            ("istio_tcp_sent_bytes_total", "tcp_sent"),
            ("istio_tcp_received_bytes_total", "tcp_received"),
        ):
            lines.append(f"# TYPE {family} counter")
            for flow in self.flows:
                for reporter in ("source", "destination"):
                    value = 1e9 + getattr(flow, attribute) * elapsed
                    lines.append(f"{family}{labels_text(ends(flow, reporter))} {value:.0f}")
        return ("\n".join(lines) + "\n").encode()

    def stop(self) -> None:
        self.server.shutdown()
