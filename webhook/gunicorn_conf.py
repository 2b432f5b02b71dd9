"""gunicorn settings for the webhook, derived from our Settings.

- TLS through gunicorn's ``ssl_context`` hook (its ``ssl_version`` setting is
  ignored by gunicorn): minimum TLS 1.2, served from a CertReloader so a
  renewed cert on disk is used by new connections without a restart.
- One worker process with threads (gthread): the in-flight ledger that
  spreads bursts lives in process memory, so one process must see every
  admission. Threads give concurrency; replicas give availability.
- The app (and so the background refresher) is created inside the worker,
  after the fork, so its threads really run.
"""

import os
from typing import Any

from kubectl_nettraffic.config import Settings
from webhook.tls import reloader_for


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    server = settings.server
    reloader = reloader_for(server.cert_file, server.key_file)

    def ssl_context(config: Any, default_ssl_context_factory: Any) -> Any:
        return reloader.context()

    host = f"[{server.address}]" if ":" in server.address else server.address
    options: dict[str, Any] = {
        "bind": [f"{host}:{server.port}"],
        "workers": 1,
        "worker_class": "gthread",
        "threads": server.threads,
        # Longer than the API server's idle connection reuse, so it keeps
        # reusing warm TLS connections instead of paying a handshake per call.
        "keepalive": 75,
        "timeout": 30,
        "graceful_timeout": 10,
        "certfile": server.cert_file,
        "keyfile": server.key_file,
        "ssl_context": ssl_context,
        "preload_app": False,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": server.log_level,
        "proc_name": "nettraffic-webhook",
        # Heartbeat files in memory: the container's root filesystem is read-only.
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        "control_socket_disable": True,
    }
    return options
