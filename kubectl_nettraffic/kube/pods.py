"""The pod vocabulary: what this project writes on pods and reads from them,
and which pods it never touches.

Annotations and labels live under ``nettraffic.io/`` (docs/design/architecture.md,
Contracts); ``explain`` reads back what steering wrote.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from kubectl_nettraffic.kube.pod_shape import malformed_part

PREFERRED_NODES = "nettraffic.io/preferred-nodes"
SCORED_AT = "nettraffic.io/scored-at"
SOURCE = "nettraffic.io/source"
# Scores at admission, "node=score,...", so `explain` can compare then and now.
SCORES = "nettraffic.io/scores"
SKIPPED = "nettraffic.io/skipped"
# kubernetes-sigs/descheduler's opt-out: present (any value) puts a pod after
# its peers of equal priority and QoS in the eviction order (pkg/descheduler/
# pod/pods.go, SortPodsBasedOnPriorityLowToHigh).
PREFER_NO_EVICTION = "descheduler.alpha.kubernetes.io/prefer-no-eviction"
EXPECTED_BANDWIDTH = "nettraffic.io/expected-bandwidth"
# A steered pod's booking in its replica's in-flight bookings: the label
# names the replica (its id is random per webhook process), so each replica
# knows its own pods; the annotation is the booking's key in it (kube/binding_watch.py).
STEERED_BY = "nettraffic.io/steered-by"
# (The traffic-tier label and its terms' weights: tiers.py.)
BOOKING = "nettraffic.io/booking"
# What a steered pod was booked at (bytes/s), and where that figure came from:
# annotation, workload (learned), cluster (learned, for a workload with no history) or default.
BOOKED_BANDWIDTH = "nettraffic.io/booked-bandwidth"
BANDWIDTH_SOURCE = "nettraffic.io/bandwidth-source"
# The preferred nodes the pod's peers pulled it toward, the points each
# gained and why (steering/peer_pull.py): "node=points:peer+peer" or
# "node=points:zone", comma-separated.
PEER_PULL = "nettraffic.io/peer-pull"
SKIP_LABEL = "nettraffic.io/skip"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"

Pod = Mapping[str, Any]
JsonPatch = list[dict[str, Any]]


def untouchable_reason(
    pod: Pod, namespace_labels: Mapping[str, str] | None, scheduler_names: Sequence[str]
) -> str | None:
    """Pods we never modify at all (no patch, not even an annotation)."""
    if malformed_part(pod) is not None:
        # The API server could not decode such a pod; steering reads none of it.
        return "malformed-pod"
    metadata, spec = pod["metadata"], pod["spec"]
    if spec.get("nodeName"):
        return "node-name-set"
    annotations = metadata.get("annotations") or {}
    if MIRROR_ANNOTATION in annotations:
        return "mirror-pod"
    for owner in metadata.get("ownerReferences") or ():
        if owner.get("kind") == "DaemonSet":
            return "daemonset"
    if (metadata.get("labels") or {}).get(SKIP_LABEL) == "true":
        return "skip-label"
    if (namespace_labels or {}).get(SKIP_LABEL) == "true":
        return "namespace-skip-label"
    if (spec.get("schedulerName") or "default-scheduler") not in scheduler_names:
        return "scheduler-name"
    if PREFERRED_NODES in annotations:
        return "already-steered"
    return None
