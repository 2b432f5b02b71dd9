"""The bundle stored as one ``kubernetes.io/tls`` Secret: ``tls.crt``,
``tls.key``, ``ca.crt`` and ``ca.key`` (the CA key stays beside the cert it
signs so rotation can re-sign; it signs nothing else). Writes are guarded by
the resourceVersion read."""

import base64
from dataclasses import dataclass
from typing import Any

from kubectl_nettraffic.kube.client import (
    MISSING,
    ApiClient,
    api_call,
    request_json,
    request_unless_missing,
)
from kubectl_nettraffic.tls.cert_bundle import Bundle


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def secret_body(
    name: str, namespace: str, bundle: Bundle, resource_version: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/managed-by": "kubectl-nettraffic"},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": metadata,
        "data": {
            "tls.crt": _b64(bundle.cert),
            "tls.key": _b64(bundle.key),
            "ca.crt": _b64(bundle.ca_cert),
            "ca.key": _b64(bundle.ca_key),
        },
    }


@dataclass(frozen=True)
class StoredSecret:
    bundle: Bundle | None  # None when malformed
    resource_version: str
    defect: str | None


def read_secret(api: ApiClient, namespace: str, name: str) -> StoredSecret | None:
    document = request_unless_missing(
        api,
        "GET",
        f"/api/v1/namespaces/{namespace}/secrets/{name}",
        f"reading Secret {namespace}/{name}",
    )
    if document is MISSING:
        return None
    version = str((document.get("metadata") or {}).get("resourceVersion") or "")
    data = document.get("data") or {}
    try:
        decoded = {
            k: base64.b64decode(data[k], validate=True)
            for k in ("ca.crt", "ca.key", "tls.crt", "tls.key")
        }
    except KeyError as missing:
        return StoredSecret(None, version, f"it has no {missing.args[0]}")
    except ValueError:
        return StoredSecret(None, version, "its data is not valid base64")
    return StoredSecret(
        Bundle(decoded["ca.crt"], decoded["ca.key"], decoded["tls.crt"], decoded["tls.key"]),
        version,
        None,
    )


def write_secret(
    api: ApiClient, namespace: str, name: str, bundle: Bundle, existing: StoredSecret | None
) -> None:
    """Create, or replace guarded by resourceVersion; one API call either way."""
    body = secret_body(name, namespace, bundle, existing.resource_version if existing else None)
    collection = f"/api/v1/namespaces/{namespace}/secrets"
    with api_call(f"writing Secret {namespace}/{name}"):
        if existing is None:
            request_json(api, "POST", collection, body=body)
        else:
            request_json(api, "PUT", f"{collection}/{name}", body=body)
