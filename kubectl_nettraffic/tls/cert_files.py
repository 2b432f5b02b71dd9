"""A certificate bundle as files in a directory (tls.crt, tls.key, ca.crt,
ca.key), each replaced atomically."""

import os
import tempfile

from kubectl_nettraffic.tls.cert_bundle import Bundle


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
