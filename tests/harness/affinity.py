"""Reading back the node affinity a decision writes."""

from typing import Any

from kubectl_nettraffic.kube.nodes import ZONE_COPY_LABEL
from kubectl_nettraffic.kube.pods import PREFERRED


def zone_terms(affinity: dict[str, Any]) -> list[dict[str, Any]]:
    """The preferred terms of a pod's ``spec.affinity`` that name zones
    (through the nodes' copy of their zone label)."""
    return [
        term
        for term in affinity["nodeAffinity"][PREFERRED]
        if term["preference"].get("matchExpressions", [{}])[0].get("key") == ZONE_COPY_LABEL
    ]
