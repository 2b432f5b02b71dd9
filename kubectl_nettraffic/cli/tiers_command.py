"""``kubectl nettraffic tiers remove``: the uninstall cleanup of the
traffic-tier node labels (the chart's post-delete hook runs it)."""

import argparse
import sys
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubectl_nettraffic.kube.client import MISSING, api_call, api_client, request_unless_missing
from kubectl_nettraffic.measuring.tier_labels import lease_namespace, remove_tier_labels
from kubectl_nettraffic.scoring.tiers import TIER_LABEL

POLL_SECONDS = 2.0


def _writer_active(lease: Mapping[str, Any], now: float) -> bool:
    """Whether the Lease still has a holder whose term has not run out."""
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return False
    try:
        renewed = datetime.fromisoformat(str(spec.get("renewTime")).replace("Z", "+00:00"))
    except ValueError:
        return False  # no usable renewTime: no live holder to wait for
    return now < renewed.timestamp() + float(spec.get("leaseDurationSeconds") or 15)


def run_remove(args: argparse.Namespace) -> int:
    api = api_client(args.kubeconfig or "", args.context)
    # As the webhook finds it (tierLabels.leaseNamespace empty): the pod's own
    # namespace when run in the cluster, as the chart's hook runs it.
    args.lease_namespace = lease_namespace(args.lease_namespace)
    path = (
        f"/apis/coordination.k8s.io/v1/namespaces/{args.lease_namespace}/leases/{args.lease_name}"
    )
    deadline = time.monotonic() + args.wait
    lease = None
    while True:
        lease = request_unless_missing(
            api, "GET", path, f"reading Lease {args.lease_namespace}/{args.lease_name}"
        )
        if lease is MISSING:
            lease = None
        if lease is None or not _writer_active(lease, time.time()):
            break
        if time.monotonic() >= deadline:
            print(
                f"warning: Lease {args.lease_namespace}/{args.lease_name} is still held by "
                f"{lease['spec']['holderIdentity']} after {args.wait:g}s; removing the labels "
                "anyway (a webhook that still runs will write them again)",
                file=sys.stderr,
            )
            break
        time.sleep(POLL_SECONDS)
    with api_call(f"removing {TIER_LABEL} from nodes"):
        removed = remove_tier_labels(api)
    print(f"removed {TIER_LABEL} from {len(removed)} node(s)")
    if lease is not None:
        request_unless_missing(
            api, "DELETE", path, f"deleting Lease {args.lease_namespace}/{args.lease_name}"
        )
        print(f"deleted Lease {args.lease_namespace}/{args.lease_name}")
    return 0
