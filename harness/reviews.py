"""AdmissionReviews shaped exactly as the API server sends them."""

import copy
import uuid
from typing import Any


def pod(
    generate_name: str = "web-7d9c4b-",
    name: str = "",
    namespace: str = "default",
    spec: dict[str, Any] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner_kind: str | None = "ReplicaSet",
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"namespace": namespace, "labels": labels or {"app": "web"}}
    if name:
        metadata["name"] = name
    else:
        metadata["generateName"] = generate_name
    if annotations:
        metadata["annotations"] = annotations
    if owner_kind:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner_kind,
                "name": generate_name.rstrip("-") or "owner",
                "uid": str(uuid.uuid4()),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    base_spec: dict[str, Any] = {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.27",
                "resources": {},
                "imagePullPolicy": "IfNotPresent",
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    base_spec.update(spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": base_spec,
        "status": {},
    }


def review(
    obj: dict[str, Any],
    operation: str = "CREATE",
    dry_run: bool = False,
    old: dict[str, Any] | None = None,
) -> dict[str, Any]:
    namespace = obj["metadata"].get("namespace", "default")
    return {
        "kind": "AdmissionReview",
        "apiVersion": "admission.k8s.io/v1",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "name": obj["metadata"].get("name", ""),
            "namespace": namespace,
            "operation": operation,
            "userInfo": {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": str(uuid.uuid4()),
                "groups": ["system:serviceaccounts", "system:authenticated"],
            },
            "object": copy.deepcopy(obj) if operation != "DELETE" else None,
            "oldObject": copy.deepcopy(old) if old else None,
            "dryRun": dry_run,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
            if operation == "CREATE"
            else None,
        },
    }
