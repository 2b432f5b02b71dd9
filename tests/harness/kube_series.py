"""cAdvisor and kube-state-metrics series shaped as the kubelet and
kube-state-metrics expose them, as OpenMetrics lines for promtool's backfill
(tests/harness/prometheus.py)."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from harness.prometheus import STEP

NONE = "<none>"


@dataclass(frozen=True)
class PodSeries:
    namespace: str
    pod: str
    rx: float  # bytes/s
    tx: float
    owner_kind: str = NONE  # kube_pod_owner
    owner_name: str = NONE
    runtime: str = "containerd"  # containerd: container=""; cri-o: container="POD"
    host_network: bool = False
    node: str = "n1"
    interfaces: tuple[str, ...] = ("eth0",)  # the rates split evenly over these
    reset_at: float | None = None  # the counter restarts this long before the end
    age: float | None = None  # created this long before the end; None: before the series start


@dataclass(frozen=True)
class ReplicaSetSeries:
    namespace: str
    replicaset: str
    owner_name: str  # kube_replicaset_owner
    owner_kind: str = "Deployment"


def labels_text(pairs: dict[str, str]) -> str:
    """A series' label set as the exposition format writes it."""
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def kube_lines(
    pods: Sequence[PodSeries],
    replicasets: Sequence[ReplicaSetSeries],
    end: float,
    duration: float = 600,
) -> Iterator[str]:
    times = [end - duration + i * STEP for i in range(int(duration // STEP) + 1)]
    yield from _cadvisor_lines(pods, times, end)
    yield from _owner_lines(pods, replicasets, times)
    yield from _created_lines(pods, times, end, duration)


# The kube-state-metrics target's labels on every series it exports.
_KSM = {"instance": "10.0.9.9:8080", "job": "kube-state-metrics"}


def _cadvisor_lines(pods: Sequence[PodSeries], times: list[float], end: float) -> Iterator[str]:
    """cAdvisor's network counters of each pod's interfaces (a pod created
    within the series starts at its age; one reset restarts from 0)."""
    for family, attribute in (
        ("container_network_receive_bytes", "rx"),
        ("container_network_transmit_bytes", "tx"),
    ):
        yield f"# TYPE {family} counter"
        for pod in pods:
            for interface in pod.interfaces:
                labels = {
                    "container": "POD" if pod.runtime == "cri-o" else "",
                    "id": f"/kubepods/burstable/pod-{pod.pod}",
                    "image": "registry.k8s.io/pause:3.9",
                    "instance": f"{pod.node}:10250",
                    "interface": interface,
                    "job": "kubelet",
                    "metrics_path": "/metrics/cadvisor",
                    "name": f"sandbox-{pod.pod}",
                    "namespace": pod.namespace,
                    "node": pod.node,
                    "pod": pod.pod,
                }
                rate = getattr(pod, attribute) / len(pod.interfaces)
                for t in times:
                    if pod.age is not None and t < end - pod.age:
                        continue  # not created yet
                    if pod.reset_at is not None and t > end - pod.reset_at:
                        value = rate * (t - (end - pod.reset_at))
                    else:
                        value = 5e8 + rate * (t - times[0])
                    yield f"{family}_total{labels_text(labels)} {value:.3f} {t:.3f}"


def _owner_lines(
    pods: Sequence[PodSeries], replicasets: Sequence[ReplicaSetSeries], times: list[float]
) -> Iterator[str]:
    """kube-state-metrics' owner and info gauges of the pods and ReplicaSets."""
    gauges = {
        "kube_pod_owner": [
            {
                "namespace": pod.namespace,
                "pod": pod.pod,
                "uid": f"uid-{pod.pod}",
                "owner_kind": pod.owner_kind,
                "owner_name": pod.owner_name,
                "owner_is_controller": "true" if pod.owner_kind != NONE else NONE,
            }
            for pod in pods
        ],
        "kube_replicaset_owner": [
            {
                "namespace": rs.namespace,
                "replicaset": rs.replicaset,
                "owner_kind": rs.owner_kind,
                "owner_name": rs.owner_name,
                "owner_is_controller": "true" if rs.owner_kind != NONE else NONE,
            }
            for rs in replicasets
        ],
        "kube_pod_info": [
            {
                "namespace": pod.namespace,
                "pod": pod.pod,
                "uid": f"uid-{pod.pod}",
                "host_ip": "10.0.0.1",
                "pod_ip": "10.0.0.1" if pod.host_network else "10.244.0.7",
                "node": pod.node,
                "created_by_kind": pod.owner_kind,
                "created_by_name": pod.owner_name,
                "priority_class": "",
                "host_network": "true" if pod.host_network else "false",
            }
            for pod in pods
        ],
    }
    for family, label_sets in gauges.items():
        yield f"# TYPE {family} gauge"
        for labels in label_sets:
            series = f"{family}{labels_text({**_KSM, **labels})}"
            for t in times:
                yield f"{series} 1 {t:.3f}"


def _created_lines(
    pods: Sequence[PodSeries], times: list[float], end: float, duration: float
) -> Iterator[str]:
    # kube-state-metrics' creation time of each pod, in Unix seconds
    # (internal/store/pod.go, kube_pod_created).
    yield "# TYPE kube_pod_created gauge"
    for pod in pods:
        labels = {**_KSM, "namespace": pod.namespace, "pod": pod.pod, "uid": f"uid-{pod.pod}"}
        at = end - (pod.age if pod.age is not None else duration + 3600)
        for t in times:
            if pod.age is None or t >= at:
                yield f"kube_pod_created{labels_text(labels)} {at:.0f} {t:.3f}"
    # kube-state-metrics' creation time of each controller, in Unix seconds:
    # as old as its oldest pod (a pod without an age: from before the series).
    created: dict[tuple[str, str, str], float] = {}
    for pod in pods:
        if pod.owner_kind in _CREATED:
            at = end - (pod.age if pod.age is not None else duration + 3600)
            owner = (pod.namespace, pod.owner_kind, pod.owner_name)
            created[owner] = min(at, created.get(owner, at))
    for kind, (family, label) in _CREATED.items():
        yield f"# TYPE {family} gauge"
        for (namespace, owner_kind, name), at in created.items():
            if owner_kind == kind:
                labels = {**_KSM, "namespace": namespace, label: name}
                for t in times:
                    yield f"{family}{labels_text(labels)} {at:.0f} {t:.3f}"


# kube-state-metrics' family and name label of each controller's creation time.
_CREATED = {
    "ReplicaSet": ("kube_replicaset_created", "replicaset"),
    "StatefulSet": ("kube_statefulset_created", "statefulset"),
    "Job": ("kube_job_created", "job_name"),
}
