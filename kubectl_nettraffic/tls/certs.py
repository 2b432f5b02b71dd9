"""Webhook TLS without cert-manager: the create, patch and rotate workflows.

The parts: X.509 in cert_bundle.py, files in cert_files.py, the Secret in
cert_secret.py, the caBundle in webhook_configuration.py.

``rotate`` never leaves a moment in which the API server would reject the
served cert: the caBundle first gains the new CA (old and new side by side),
only then does the Secret get the new cert; CAs that have expired are
dropped from the bundle. If the Secret write fails the caBundle is put back.
"""

from dataclasses import dataclass

from kubectl_nettraffic.errors import CertError, ClusterError
from kubectl_nettraffic.kube.client import ApiClient
from kubectl_nettraffic.tls.cert_bundle import (
    DEFAULT_CA_DAYS,
    DEFAULT_RENEW_BEFORE_DAYS,
    DEFAULT_SERVING_DAYS,
    Bundle,
    ca_due,
    issue,
    merge_ca_bundle,
    problems,
)
from kubectl_nettraffic.tls.cert_files import read_files, write_files
from kubectl_nettraffic.tls.cert_secret import read_secret, write_secret
from kubectl_nettraffic.tls.webhook_configuration import (
    current_ca_bundle,
    patch_ca_bundle,
    read_webhook_configuration,
)


@dataclass(frozen=True)
class Issuance:
    service: str
    namespace: str
    key_type: str = "ecdsa"
    ca_days: int = DEFAULT_CA_DAYS
    days: int = DEFAULT_SERVING_DAYS
    renew_before_days: int = DEFAULT_RENEW_BEFORE_DAYS
    extra_sans: tuple[str, ...] = ()

    def new(self, ca: tuple[bytes, bytes] | None = None) -> Bundle:
        return issue(
            self.service,
            self.namespace,
            self.key_type,
            self.ca_days,
            self.days,
            self.extra_sans,
            ca,
        )


def create_in_directory(directory: str, spec: Issuance) -> str:
    """Keep a valid bundle in ``directory``; replace a broken or expiring one."""
    existing = read_files(directory)
    if existing is not None:
        found = problems(existing, spec.service, spec.namespace, spec.renew_before_days)
        if not found:
            return f"kept the valid certificate in {directory}"
        write_files(spec.new(), directory)
        return f"replaced the certificate in {directory} ({'; '.join(found)})"
    write_files(spec.new(), directory)
    return f"created a CA and serving certificate in {directory}"


def create_in_cluster(api: ApiClient, secret: str, spec: Issuance) -> str:
    """Keep a valid Secret; replace a broken or expiring one; say which happened."""
    stored = read_secret(api, spec.namespace, secret)
    where = f"Secret {spec.namespace}/{secret}"
    if stored is None:
        write_secret(api, spec.namespace, secret, spec.new(), None)
        return f"created {where}"
    if stored.bundle is None:
        found = [stored.defect or "malformed"]
    else:
        found = problems(stored.bundle, spec.service, spec.namespace, spec.renew_before_days)
    if not found:
        return f"kept {where}: valid, SANs match, not due for renewal"
    write_secret(api, spec.namespace, secret, spec.new(), stored)
    return f"replaced {where} ({'; '.join(found)})"


def patch_in_cluster(
    api: ApiClient, secret: str, namespace: str, webhook: str, failure_policy: str | None
) -> str:
    stored = read_secret(api, namespace, secret)
    if stored is None or stored.bundle is None:
        why = "does not exist" if stored is None else f"is malformed: {stored.defect}"
        raise CertError(
            f"Secret {namespace}/{secret} {why}; run kubectl nettraffic certs create first"
        )
    configuration = read_webhook_configuration(api, webhook)
    bundle = merge_ca_bundle(current_ca_bundle(configuration), stored.bundle.ca_cert)
    patch_ca_bundle(api, webhook, bundle, configuration, failure_policy)
    count = len(configuration.get("webhooks") or [])
    return f"patched caBundle of {count} webhook(s) in MutatingWebhookConfiguration {webhook}"


def rotate_in_cluster(
    api: ApiClient, secret: str, webhook: str, spec: Issuance, force: bool = False
) -> str:
    """New serving cert (new CA when due) with no window of rejected handshakes."""
    where = f"Secret {spec.namespace}/{secret}"
    stored = read_secret(api, spec.namespace, secret)
    if stored is None or stored.bundle is None:
        why = "does not exist" if stored is None else f"is malformed: {stored.defect}"
        raise CertError(f"{where} {why}; run kubectl nettraffic certs create to replace it")
    current = stored.bundle
    found = problems(current, spec.service, spec.namespace, spec.renew_before_days)
    if not found and not force:
        return f"nothing to rotate: {where} is valid and not due"
    new_ca = ca_due(current) or any("not signed" in f for f in found)
    bundle = spec.new() if new_ca else spec.new(ca=(current.ca_cert, current.ca_key))
    configuration = read_webhook_configuration(api, webhook)
    previous = current_ca_bundle(configuration)
    merged = merge_ca_bundle(previous, bundle.ca_cert)
    # Old CA keeps the running cert trusted while the new one rolls out.
    merged = merge_ca_bundle(merged, current.ca_cert) if new_ca else merged
    if merged != previous:
        patch_ca_bundle(api, webhook, merged, configuration)
    try:
        write_secret(api, spec.namespace, secret, bundle, stored)
    except ClusterError:
        if merged != previous:
            patch_ca_bundle(api, webhook, previous)  # put the caBundle back as it was
        raise
    return f"rotated {where}: new serving cert{' and new CA' if new_ca else ''}; caBundle holds {merged.count(b'BEGIN CERTIFICATE')} CA(s)"
