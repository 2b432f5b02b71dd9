"""Node CPU and memory usage from metrics-server (``metrics.k8s.io``).

Usage is divided by the node's allocatable in scoring; here we only read and
parse the raw usage, through the real kubernetes client.
"""

from collections.abc import Mapping

from kubectl_nettraffic.errors import SourceError
from kubectl_nettraffic.kube.client import API_ERRORS, ApiClient, describe_api_error, request_json
from kubectl_nettraffic.scoring.readings import NodeUsage
from kubectl_nettraffic.units import parse_quantity


class MetricsServerSource:
    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def fetch(self) -> Mapping[str, NodeUsage]:
        try:
            document = request_json(self.api, "GET", "/apis/metrics.k8s.io/v1beta1/nodes")
        except API_ERRORS as error:
            raise SourceError(
                str(describe_api_error(error, "reading metrics.k8s.io/v1beta1 nodes"))
                + " (is metrics-server installed? kubectl top nodes should work)"
            ) from error
        usage: dict[str, NodeUsage] = {}
        for item in document.get("items") or []:
            name = str((item.get("metadata") or {}).get("name") or "")
            values = item.get("usage") or {}
            try:
                usage[name] = NodeUsage(
                    cpu=parse_quantity(values["cpu"]), memory=parse_quantity(values["memory"])
                )
            except (KeyError, ValueError, TypeError):
                continue  # a node without usable numbers simply has no data
        return usage
