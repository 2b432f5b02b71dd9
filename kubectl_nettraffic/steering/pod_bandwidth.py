"""What a pod is expected to send, and where that figure came from.

In order: the pod's own ``nettraffic.io/expected-bandwidth`` annotation, its
workload's learned figure, the cluster-wide learned figure, the configured
default (steering.defaultPodBandwidth).
"""

from kubectl_nettraffic.kube.pods import EXPECTED_BANDWIDTH, Pod
from kubectl_nettraffic.kube.workloads import pod_workload
from kubectl_nettraffic.learning.workload_bandwidth import LearnedBandwidth
from kubectl_nettraffic.units import parse_quantity


def expected_bandwidth(
    pod: Pod, learned: LearnedBandwidth | None, default: float
) -> tuple[float, str, str | None]:
    """What the pod will send (bytes/s), where that figure came from
    (annotation | workload | cluster | default), and a warning when its
    annotation is unusable. In that order: the pod's own annotation, its
    workload's learned figure, the cluster-wide learned figure, the default."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(EXPECTED_BANDWIDTH)
    if text is not None:
        value = annotated_bandwidth(text)
        if value is not None:
            return value, "annotation", None
    figure, source = default, "default"
    if learned is not None:
        workload = pod_workload(pod)
        learned_figure = learned.workloads.get(workload) if workload is not None else None
        if learned_figure is not None:
            figure, source = learned_figure, "workload"
        elif learned.cluster is not None:
            figure, source = learned.cluster, "cluster"
    warning = None
    if text is not None:
        instead = {
            "default": "the default",
            "workload": "its workload's learned figure",
            "cluster": "the cluster-wide learned figure",
        }[source]
        warning = (
            f"{EXPECTED_BANDWIDTH}={text!r} is not a bandwidth in bytes/s; "
            f"booked at {instead}, {figure:g}. Write it like 10Mi or 500k"
        )
    return figure, source, warning


def annotated_bandwidth(text: object) -> float | None:
    """Bytes/s from a quantity annotation; None when it is not one."""
    try:
        value = parse_quantity(str(text))
    except ValueError:
        return None
    return value if value >= 0 else None


def light_for_every_link(bandwidth: float, source: str, slowest_link: float, share: float) -> bool:
    """Whether a pod may carry the descheduler's prefer-no-eviction mark
    (steering.preferNoEvictionBelow): its figure is its own (annotated or
    learned from its workload, not a default or cluster-wide guess) and
    below ``share`` of the slowest eligible link, so it is light wherever it
    lands. Evicting it would hardly cool its node."""
    return share > 0 and source in ("annotation", "workload") and bandwidth < share * slowest_link
