"""Serving-certificate hot reload for gunicorn.

gunicorn asks its ``ssl_context`` hook for a context on every new connection.
``CertReloader.context()`` answers from a cache and rebuilds it only when the
cert or key file changed on disk (a Secret volume update swaps a symlink, so
the stat changes). New connections then get the new cert with no restart;
open connections keep theirs. A half-written pair (key does not match cert)
keeps the previous context and is logged.
"""

import hashlib
import logging
import os
import ssl
import threading
from dataclasses import dataclass

from cryptography import x509

log = logging.getLogger(__name__)


def _stamp(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def pem_not_after(path: str) -> float | None:
    """When the first certificate in a PEM file expires (Unix time), or None if unreadable."""
    try:
        with open(path, "rb") as handle:
            certificate = x509.load_pem_x509_certificate(handle.read())
    except (OSError, ValueError):
        return None
    return certificate.not_valid_after_utc.timestamp()


def pem_fingerprint(path: str) -> str | None:
    """SHA-256 of the first certificate in a PEM file (DER), or None if unreadable."""
    try:
        with open(path, encoding="ascii") as handle:
            text = handle.read()
        start = text.index("-----BEGIN CERTIFICATE-----")
        end = text.index("-----END CERTIFICATE-----", start) + len("-----END CERTIFICATE-----")
        der = ssl.PEM_cert_to_DER_cert(text[start:end])
    except (OSError, ValueError):
        return None
    return hashlib.sha256(der).hexdigest()


@dataclass(frozen=True)
class CertStatus:
    served: str | None
    on_disk: str | None

    @property
    def in_sync(self) -> bool:
        return self.served is not None and self.served == self.on_disk


class CertReloader:
    def __init__(self, cert_file: str, key_file: str) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._stamps: tuple[tuple[int, int, int], tuple[int, int, int]] | None = None
        self.served_fingerprint: str | None = None
        self.served_not_after: float | None = None  # Unix time

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context

    def context(self) -> ssl.SSLContext:
        try:
            stamps = (_stamp(self.cert_file), _stamp(self.key_file))
        except OSError:
            stamps = None
        if self._context is not None and (stamps is None or stamps == self._stamps):
            return self._context
        with self._lock:
            if self._context is not None and stamps == self._stamps:
                return self._context
            try:
                context = self._build()
            except (OSError, ssl.SSLError) as error:
                if self._context is None:
                    raise
                log.warning("keeping the previous serving cert; new one unusable: %s", error)
                self._stamps = stamps  # do not retry on every connection
                return self._context
            if self._context is not None:
                log.info("serving certificate reloaded from %s", self.cert_file)
            self._context, self._stamps = context, stamps
            self.served_fingerprint = pem_fingerprint(self.cert_file)
            self.served_not_after = pem_not_after(self.cert_file)
            return context

    def status(self) -> CertStatus:
        return CertStatus(self.served_fingerprint, pem_fingerprint(self.cert_file))


_reloaders: dict[tuple[str, str], CertReloader] = {}
_reloaders_lock = threading.Lock()


def reloader_for(cert_file: str, key_file: str) -> CertReloader:
    """One reloader per cert/key pair per process, shared by the TLS hook and /readyz."""
    with _reloaders_lock:
        key = (cert_file, key_file)
        if key not in _reloaders:
            _reloaders[key] = CertReloader(cert_file, key_file)
        return _reloaders[key]
