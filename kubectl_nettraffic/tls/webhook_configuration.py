"""The MutatingWebhookConfiguration's caBundle: read it, and set it on every
webhook with one JSON patch guarded by a ``test`` of the resourceVersion, so
a concurrent edit fails cleanly instead of being overwritten."""

import base64
from typing import Any

from kubectl_nettraffic.errors import ClusterError
from kubectl_nettraffic.kube.client import (
    MISSING,
    ApiClient,
    api_call,
    request_json,
    request_unless_missing,
)


def _webhook_path(name: str) -> str:
    return f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"


def read_webhook_configuration(api: ApiClient, name: str) -> dict[str, Any]:
    document = request_unless_missing(
        api, "GET", _webhook_path(name), f"reading MutatingWebhookConfiguration {name}"
    )
    if document is MISSING:
        raise ClusterError(
            f"MutatingWebhookConfiguration {name!r} does not exist; install the chart first "
            "or check --webhook-name"
        )
    configuration: dict[str, Any] = document
    return configuration


def current_ca_bundle(configuration: dict[str, Any]) -> bytes:
    webhooks = configuration.get("webhooks") or []
    encoded = ((webhooks[0].get("clientConfig") or {}).get("caBundle") or "") if webhooks else ""
    try:
        return base64.b64decode(encoded)
    except ValueError:
        return b""


def patch_ca_bundle(
    api: ApiClient,
    name: str,
    ca_bundle: bytes,
    configuration: dict[str, Any] | None = None,
    failure_policy: str | None = None,
) -> dict[str, Any]:
    """Set caBundle on every webhook with one guarded JSON patch; returns the previous object."""
    configuration = configuration or read_webhook_configuration(api, name)
    webhooks = configuration.get("webhooks") or []
    if not webhooks:
        raise ClusterError(f"MutatingWebhookConfiguration {name!r} has no webhooks to patch")
    version = (configuration.get("metadata") or {}).get("resourceVersion")
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version}
    ]
    for index, _ in enumerate(webhooks):
        ops.append(
            {
                "op": "add",
                "path": f"/webhooks/{index}/clientConfig/caBundle",
                "value": base64.b64encode(ca_bundle).decode(),
            }
        )
        if failure_policy:
            ops.append(
                {"op": "add", "path": f"/webhooks/{index}/failurePolicy", "value": failure_policy}
            )
    with api_call(f"patching MutatingWebhookConfiguration {name}"):
        request_json(
            api, "PATCH", _webhook_path(name), body=ops, content_type="application/json-patch+json"
        )
    return configuration


def delete_webhook_configuration(api: ApiClient, name: str) -> str:
    answer = request_unless_missing(
        api, "DELETE", _webhook_path(name), f"deleting MutatingWebhookConfiguration {name}"
    )
    if answer is MISSING:
        return f"MutatingWebhookConfiguration {name} was already gone"
    return f"deleted MutatingWebhookConfiguration {name}"
