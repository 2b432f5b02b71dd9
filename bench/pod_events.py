"""The pods the placement simulation shows its webhook replicas' watches,
and their watch events' lines, as the API server writes them.

The API server encodes an event compactly (Go's encoding/json), its type
first (metav1.WatchEvent), and a pod's metadata in ObjectMeta's field order
(apimachinery pkg/apis/meta/v1/types.go): the watches read the raw lines
before decoding them (kubectl_nettraffic/kube/watch_lines.py).
"""

import json
from typing import Any

from harness.reviews import pod as pod_object


def event_line(kind: str, pod: dict[str, Any]) -> bytes:
    """One watch event's line: ADDED, MODIFIED or DELETED."""
    return json.dumps({"type": kind, "object": pod}, separators=(",", ":")).encode()


def unsteered_pod(workload: str, template: str, number: int, node: str = "") -> dict[str, Any]:
    """A Deployment's pod no replica steered (it ran before the install, or
    was admitted without a booking); bound to ``node`` and running, if given."""
    pod = pod_object(
        generate_name=f"{workload}-{template}-",
        labels={"app": workload, "pod-template-hash": template},
    )
    metadata = pod["metadata"]
    name = f"{workload}-{template}-u{number:05d}"
    pod["metadata"] = {"name": name, "namespace": metadata.pop("namespace"), "uid": name}
    pod["metadata"].update(metadata)
    if node:
        pod["spec"]["nodeName"] = node
        pod["status"] = {"phase": "Running"}
    return pod
