"""Where ``top`` gets its scores: the running webhook (through the API
server's service proxy, no port-forward) or the same engine run locally."""

import json
import sys
from dataclasses import dataclass
from typing import Any

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import ClusterError, NetTrafficError, SourceError
from kubectl_nettraffic.kube.client import (
    API_ERRORS,
    ApiClient,
    api_client,
    describe_api_error,
    request_json,
)
from kubectl_nettraffic.kube.cluster import list_nodes, load_node_file
from kubectl_nettraffic.labels import parse_selector
from kubectl_nettraffic.measuring.engine import build_engine
from kubectl_nettraffic.measuring.scoreview import scores_document


@dataclass(frozen=True)
class WebhookLocation:
    namespace: str = "nettraffic"
    service: str = "nettraffic"
    port: int = 443

    def proxy_path(self, endpoint: str) -> str:
        """The API server's service proxy path to one of the webhook's endpoints."""
        return f"/api/v1/namespaces/{self.namespace}/services/https:{self.service}:{self.port}/proxy/{endpoint}"


def from_webhook(api: ApiClient, where: WebhookLocation) -> dict[str, Any]:
    """GET /scores through /api/v1/namespaces/NS/services/https:SVC:PORT/proxy/."""
    try:
        document = request_json(api, "GET", where.proxy_path("scores"))
    except json.JSONDecodeError as error:
        raise ClusterError(
            f"the webhook {where.namespace}/{where.service} answered something that is not JSON"
        ) from error
    except API_ERRORS as error:
        raise describe_api_error(
            error,
            f"reading scores from the webhook {where.namespace}/{where.service} via the service proxy",
        ) from error
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise ClusterError(
            f"the webhook {where.namespace}/{where.service} answered no scores: {str(document)[:200]}"
        )
    return document


def computed_locally(settings: Settings, context: str | None) -> dict[str, Any]:
    """One refresh of the same engine the webhook runs, here and now."""
    engine = build_engine(settings, context=context, watch_nodes=False, learn=False)
    snapshot = engine.refresh()
    if snapshot is None:
        reasons = "; ".join(engine.scoreboard.last_errors) or "no source is configured"
        raise SourceError(f"{reasons}; or run kubectl nettraffic doctor")
    for error in snapshot.diagnostics.errors:
        print(f"warning: {error}", file=sys.stderr)
    return dict(scores_document(snapshot, {}, stale=False))


def fetch(
    source: str, settings: Settings, context: str | None, where: WebhookLocation, verbose: bool
) -> tuple[dict[str, Any], str]:
    """The scores document and a word on where it came from."""
    if source == "webhook":
        return from_webhook(api_client(settings.kubeconfig, context), where), "webhook"
    if source == "prometheus":
        return computed_locally(settings, context), "local engine"
    try:
        return from_webhook(api_client(settings.kubeconfig, context), where), "webhook"
    except NetTrafficError as error:
        if verbose:
            print(f"webhook unavailable ({error}); computing locally", file=sys.stderr)
        return computed_locally(settings, context), "local engine (webhook unavailable)"


def node_filter(
    settings: Settings, context: str | None, names: list[str], selector: str
) -> set[str] | None:
    """Names to show, or None for all: NODE arguments and -l through the API."""
    wanted = set(names) if names else None
    if selector:
        if settings.nodes.file:
            parsed = parse_selector(selector)
            matched = {
                n.name for n in load_node_file(settings.nodes.file) if parsed.matches(n.labels)
            }
        else:
            matched = {
                n.name for n in list_nodes(api_client(settings.kubeconfig, context), selector)
            }
        wanted = matched if wanted is None else wanted & matched
    return wanted
