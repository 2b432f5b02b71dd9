"""Reading a pod watch's raw JSON lines before decoding them, and when a
pod stops counting for kube-scheduler.

Most of a pod's events after its binding are the kubelet's status updates,
and decoding them was most of a watch's cost; a watch that knows from a
few bytes that an event changes nothing skips it. Go's encoder writes a
watch event's type first (metav1.WatchEvent, apimachinery
pkg/apis/meta/v1/watch.go) and the object's keys in field order, with "/"
unescaped; a quoted key inside an annotation's value (kubectl's
last-applied-configuration) has its quotes escaped, so never matches.
"""

from collections.abc import Mapping
from typing import Any

# Phases after which a pod never runs again: unbound in one, it never will.
FINISHED = ("Failed", "Succeeded")

DELETED_IN_JSON = b'"type":"DELETED"'  # look in the line's first 32 bytes
# A pod turning terminating or finished: kube-scheduler counts it no more.
ENDING_IN_JSON = (
    b'"deletionTimestamp":"',
    *(b'"phase":"%s"' % phase.encode() for phase in FINISHED),
)


def raw_value(line: bytes, marker: bytes) -> bytes:
    """The string value after ``marker`` in a raw JSON line; b"" when absent."""
    at = line.find(marker)
    if at < 0:
        return b""
    start = at + len(marker)
    return line[start : line.find(b'"', start)]


def ends_raw(line: bytes) -> bool:
    """The event deletes the pod, or shows it terminating or finished."""
    return DELETED_IN_JSON in line[:32] or any(marker in line for marker in ENDING_IN_JSON)


def bound_node(pod: Mapping[str, Any]) -> str:
    """The node the pod is bound to; "" while unbound."""
    node = (pod.get("spec") or {}).get("nodeName")
    return node if isinstance(node, str) else ""


def finished(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed: it never runs again."""
    return (pod.get("status") or {}).get("phase") in FINISHED


def ended(pod: Mapping[str, Any]) -> bool:
    """Terminating or finished: kube-scheduler's spread counts it no more. Its
    PodTopologySpread skips a pod with a deletionTimestamp
    (podtopologyspread/common.go, ``countPodsMatchSelector``) and its pod
    informer lists no Succeeded or Failed pod (pkg/scheduler/scheduler.go,
    ``newPodInformer``'s field selector)."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) or finished(pod)
