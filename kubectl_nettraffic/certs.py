"""Webhook TLS without cert-manager: issue, store, patch, rotate.

- A CA (ECDSA P-256 by default, RSA 2048 on request) signs a serving cert for
  the webhook Service's DNS names. notBefore is a few minutes in the past so
  a node with a slightly slow clock accepts it at once.
- Storage is one ``kubernetes.io/tls`` Secret: ``tls.crt``, ``tls.key``,
  ``ca.crt`` and ``ca.key`` (the CA key stays beside the cert it signs so
  rotation can re-sign; it signs nothing else).
- ``patch`` sets ``caBundle`` on every webhook of a
  MutatingWebhookConfiguration with one JSON patch guarded by a ``test`` of
  the resourceVersion, so a concurrent edit fails cleanly instead of being
  overwritten.
- ``rotate`` never leaves a moment in which the API server would reject the
  served cert: the caBundle first gains the new CA (old and new side by side),
  only then does the Secret get the new cert; CAs that have expired are
  dropped from the bundle. If the Secret write fails the caBundle is put back.
"""

import base64
import datetime as dt
import ipaddress
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubectl_nettraffic.cluster import describe_api_error, request_json
from kubectl_nettraffic.errors import CertError, ClusterError

# Five years for the CA: long enough that its rotation is a rare, planned
# event; one year for the serving cert, renewed a month ahead.
DEFAULT_CA_DAYS = 5 * 365
DEFAULT_SERVING_DAYS = 365
DEFAULT_RENEW_BEFORE_DAYS = 30
# A new CA is made once the current one has less than a year left, so the
# old and new CA overlap in caBundles for a long time.
CA_RENEW_BEFORE_DAYS = 365
BACKDATE = dt.timedelta(minutes=5)

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class Bundle:
    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def dns_names(service: str, namespace: str) -> list[str]:
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _new_key(key_type: str) -> PrivateKey:
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    raise CertError(f"key type {key_type!r} is not ecdsa or rsa")


def _pem_key(key: PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _key_usage(**granted: bool) -> x509.KeyUsage:
    """digitalSignature plus whatever is ``granted``; every other usage off."""
    usages = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "key_cert_sign",
            "crl_sign",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    usages.update(granted)
    return x509.KeyUsage(digital_signature=True, **usages)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def issue(
    service: str,
    namespace: str,
    key_type: str = "ecdsa",
    ca_days: int = DEFAULT_CA_DAYS,
    days: int = DEFAULT_SERVING_DAYS,
    extra_sans: Sequence[str] = (),
    ca: tuple[bytes, bytes] | None = None,
    now: dt.datetime | None = None,
) -> Bundle:
    """A serving cert for the Service, signed by ``ca`` (cert, key PEM) or a new CA."""
    now = now or _now()
    if ca is None:
        ca_key = _new_key(key_type)
        ca_name = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, f"nettraffic-ca-{namespace}-{service}")]
        )
        ca_cert = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(now + dt.timedelta(days=ca_days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_key_usage(key_cert_sign=True, crl_sign=True), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
        ca_key_pem = _pem_key(ca_key)
    else:
        ca_pem, ca_key_pem = ca
        ca_cert = x509.load_pem_x509_certificate(ca_pem)
        loaded = serialization.load_pem_private_key(ca_key_pem, password=None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey):
            raise CertError("the CA key is neither ECDSA nor RSA")
        ca_key = loaded
    key = _new_key(key_type)
    names = dns_names(service, namespace)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    for extra in extra_sans:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(extra)))
        except ValueError:
            sans.append(x509.DNSName(extra))
    not_after = min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[2])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        # RSA key exchange encrypts with the key; ECDSA only signs.
        .add_extension(
            _key_usage(key_encipherment=isinstance(key, rsa.RSAPrivateKey)), critical=True
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return Bundle(ca_pem, ca_key_pem, cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))


# ---------------------------------------------------------------- checking


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    public = ca.public_key()
    algorithm = cert.signature_hash_algorithm
    if algorithm is None or cert.issuer != ca.subject:
        return False
    try:
        if isinstance(public, ec.EllipticCurvePublicKey):
            public.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(algorithm))
        elif isinstance(public, rsa.RSAPublicKey):
            public.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), algorithm)
        else:
            return False
    except InvalidSignature:
        return False
    return True


def problems(
    bundle: Bundle,
    service: str,
    namespace: str,
    renew_before_days: int = DEFAULT_RENEW_BEFORE_DAYS,
    now: dt.datetime | None = None,
) -> list[str]:
    """Why ``bundle`` must be replaced; empty when it can be kept."""
    now = now or _now()
    try:
        cert = x509.load_pem_x509_certificate(bundle.cert)
        ca = x509.load_pem_x509_certificate(bundle.ca_cert)
        key = serialization.load_pem_private_key(bundle.key, password=None)
        serialization.load_pem_private_key(bundle.ca_key, password=None)
    except (ValueError, TypeError) as error:
        return [f"unreadable PEM ({error})"]
    found = []
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(
        serialization.Encoding.DER, public
    ) != cert.public_key().public_bytes(serialization.Encoding.DER, public):
        found.append("tls.key does not match tls.crt")
    if not signed_by(cert, ca):
        found.append("tls.crt is not signed by ca.crt")
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        missing = set(dns_names(service, namespace)) - set(san.get_values_for_type(x509.DNSName))
    except x509.ExtensionNotFound:
        missing = set(dns_names(service, namespace))
    if missing:
        found.append(f"SANs lack {', '.join(sorted(missing))}")
    renew_at = cert.not_valid_after_utc - dt.timedelta(days=renew_before_days)
    if now >= renew_at:
        found.append(
            f"tls.crt expires {cert.not_valid_after_utc:%Y-%m-%d}, within {renew_before_days} days"
        )
    if now >= ca.not_valid_after_utc - dt.timedelta(
        days=min(renew_before_days, CA_RENEW_BEFORE_DAYS)
    ):
        found.append(f"ca.crt expires {ca.not_valid_after_utc:%Y-%m-%d}")
    return found


def ca_due(bundle: Bundle, now: dt.datetime | None = None) -> bool:
    ca = x509.load_pem_x509_certificate(bundle.ca_cert)
    return (now or _now()) >= ca.not_valid_after_utc - dt.timedelta(days=CA_RENEW_BEFORE_DAYS)


def merge_ca_bundle(current: bytes, new_ca: bytes, now: dt.datetime | None = None) -> bytes:
    """``new_ca`` plus every unexpired, distinct CA already in ``current``."""
    now = now or _now()
    kept = [new_ca.strip()]
    try:
        old = x509.load_pem_x509_certificates(current) if current.strip() else []
    except ValueError:
        old = []  # an unreadable bundle is replaced, not merged
    new_cert = x509.load_pem_x509_certificate(new_ca)
    for cert in old:
        if cert.not_valid_after_utc > now and cert != new_cert:
            kept.append(cert.public_bytes(serialization.Encoding.PEM).strip())
    return b"\n".join(kept) + b"\n"


# ---------------------------------------------------------------- files


def write_files(bundle: Bundle, directory: str) -> list[str]:
    """ca.crt, tls.crt, tls.key (0600) in ``directory``; each replaced atomically."""
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, data, mode in (
        ("ca.crt", bundle.ca_cert, 0o644),
        ("ca.key", bundle.ca_key, 0o600),
        ("tls.key", bundle.key, 0o600),
        ("tls.crt", bundle.cert, 0o644),
    ):
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=f".{name}.")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, os.path.join(directory, name))
        written.append(os.path.join(directory, name))
    return written


def read_files(directory: str) -> Bundle | None:
    try:
        parts = {}
        for name in ("ca.crt", "ca.key", "tls.crt", "tls.key"):
            with open(os.path.join(directory, name), "rb") as handle:
                parts[name] = handle.read()
    except FileNotFoundError:
        return None
    return Bundle(parts["ca.crt"], parts["ca.key"], parts["tls.crt"], parts["tls.key"])


# ---------------------------------------------------------------- Secret


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


def read_secret(api: k8s.ApiClient, namespace: str, name: str) -> StoredSecret | None:
    try:
        document = request_json(api, "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except ApiException as error:
        if error.status == 404:
            return None
        raise describe_api_error(error, f"reading Secret {namespace}/{name}") from None
    except Exception as error:
        raise describe_api_error(error, f"reading Secret {namespace}/{name}") from None
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
    api: k8s.ApiClient, namespace: str, name: str, bundle: Bundle, existing: StoredSecret | None
) -> None:
    """Create, or replace guarded by resourceVersion; one API call either way."""
    body = secret_body(name, namespace, bundle, existing.resource_version if existing else None)
    collection = f"/api/v1/namespaces/{namespace}/secrets"
    try:
        if existing is None:
            request_json(api, "POST", collection, body=body)
        else:
            request_json(api, "PUT", f"{collection}/{name}", body=body)
    except Exception as error:
        raise describe_api_error(error, f"writing Secret {namespace}/{name}") from None


# ---------------------------------------------------------------- webhook configuration


def _webhook_path(name: str) -> str:
    return f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{name}"


def read_webhook_configuration(api: k8s.ApiClient, name: str) -> dict[str, Any]:
    try:
        document: dict[str, Any] = request_json(api, "GET", _webhook_path(name))
        return document
    except ApiException as error:
        if error.status == 404:
            raise ClusterError(
                f"MutatingWebhookConfiguration {name!r} does not exist; install the chart first "
                "or check --webhook-name"
            ) from None
        raise describe_api_error(error, f"reading MutatingWebhookConfiguration {name}") from None
    except Exception as error:
        raise describe_api_error(error, f"reading MutatingWebhookConfiguration {name}") from None


def current_ca_bundle(configuration: dict[str, Any]) -> bytes:
    webhooks = configuration.get("webhooks") or []
    encoded = ((webhooks[0].get("clientConfig") or {}).get("caBundle") or "") if webhooks else ""
    try:
        return base64.b64decode(encoded)
    except ValueError:
        return b""


def patch_ca_bundle(
    api: k8s.ApiClient,
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
                "value": _b64(ca_bundle),
            }
        )
        if failure_policy:
            ops.append(
                {"op": "add", "path": f"/webhooks/{index}/failurePolicy", "value": failure_policy}
            )
    try:
        request_json(
            api, "PATCH", _webhook_path(name), body=ops, content_type="application/json-patch+json"
        )
    except Exception as error:
        raise describe_api_error(error, f"patching MutatingWebhookConfiguration {name}") from None
    return configuration


def delete_webhook_configuration(api: k8s.ApiClient, name: str) -> str:
    try:
        request_json(api, "DELETE", _webhook_path(name))
    except ApiException as error:
        if error.status == 404:
            return f"MutatingWebhookConfiguration {name} was already gone"
        raise describe_api_error(error, f"deleting MutatingWebhookConfiguration {name}") from None
    except Exception as error:
        raise describe_api_error(error, f"deleting MutatingWebhookConfiguration {name}") from None
    return f"deleted MutatingWebhookConfiguration {name}"


# ---------------------------------------------------------------- commands


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


def create_in_cluster(api: k8s.ApiClient, secret: str, spec: Issuance) -> str:
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
    api: k8s.ApiClient, secret: str, namespace: str, webhook: str, failure_policy: str | None
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
    api: k8s.ApiClient, secret: str, webhook: str, spec: Issuance, force: bool = False
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
