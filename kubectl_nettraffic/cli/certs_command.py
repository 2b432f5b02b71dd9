"""``kubectl nettraffic certs create|patch|rotate``."""

import argparse

from kubectl_nettraffic.errors import ConfigError
from kubectl_nettraffic.kube.client import api_client
from kubectl_nettraffic.tls.certs import (
    Issuance,
    create_in_cluster,
    create_in_directory,
    patch_in_cluster,
    rotate_in_cluster,
)
from kubectl_nettraffic.tls.webhook_configuration import delete_webhook_configuration


def _issuance(args: argparse.Namespace) -> Issuance:
    if args.days < 1 or args.ca_days < args.days:
        raise ConfigError(
            f"--days {args.days} / --ca-days {args.ca_days}: need 1 <= days <= ca-days"
        )
    if not 0 <= args.renew_before < args.days:
        raise ConfigError(
            f"--renew-before {args.renew_before} must be at least 0 and less than --days {args.days}"
        )
    return Issuance(
        args.service,
        args.namespace,
        args.key_type,
        args.ca_days,
        args.days,
        args.renew_before,
        tuple(args.extra_san),
    )


def run_create(args: argparse.Namespace) -> int:
    spec = _issuance(args)
    if args.out_dir:
        print(create_in_directory(args.out_dir, spec))
    else:
        print(create_in_cluster(api_client(args.kubeconfig or "", args.context), args.secret, spec))
    return 0


def run_patch(args: argparse.Namespace) -> int:
    api = api_client(args.kubeconfig or "", args.context)
    print(
        patch_in_cluster(api, args.secret, args.namespace, args.webhook_name, args.failure_policy)
    )
    return 0


def run_rotate(args: argparse.Namespace) -> int:
    api = api_client(args.kubeconfig or "", args.context)
    print(rotate_in_cluster(api, args.secret, args.webhook_name, _issuance(args), force=args.force))
    return 0


def run_cleanup(args: argparse.Namespace) -> int:
    """Remove the webhook configuration first on uninstall, so no pod creation
    waits on a webhook whose pods are already going away."""
    print(
        delete_webhook_configuration(
            api_client(args.kubeconfig or "", args.context), args.webhook_name
        )
    )
    return 0
