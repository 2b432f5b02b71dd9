"""X.509 for the webhook: a CA and the serving certificate it signs, and the
checks that say whether a bundle still serves.

A CA (ECDSA P-256 by default, RSA 2048 on request) signs a serving cert for
the webhook Service's DNS names. notBefore is a few minutes in the past so a
node with a slightly slow clock accepts it at once.
"""

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubectl_nettraffic.errors import CertError

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
