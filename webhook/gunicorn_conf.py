"""gunicorn settings for the webhook, derived from our Settings.

- TLS through gunicorn's ``ssl_context`` hook (its ``ssl_version`` setting is
  ignored by gunicorn): minimum TLS 1.2, served from a CertReloader so a
  renewed cert on disk is used by new connections without a restart.
- One worker process with threads (gthread): the in-flight bookings that
  spread bursts live in process memory, so one process must see every
  admission. Threads give concurrency; replicas give availability.
- The app is created inside the worker, after the fork, so its threads
  really run and the refresher process it spawns is the worker's child.
- Once it is, the worker's interpreter is tuned for admission latency
  (``tune_interpreter``).
"""

import gc
import os
import sys
from typing import Any

from kubectl_nettraffic.config import Settings
from webhook.tls import reloader_for

# The longest a thread keeps the GIL while another waits for it (CPython's
# default is 5 ms). Refreshes run in their own process, but some work in the
# worker still runs for milliseconds (loading a refresh's outcome, timed by
# python -m bench.engine; rendering /scores or /metrics); with 5 ms turns,
# every admission arriving meanwhile would wait up to 5 ms each time it
# wanted the GIL back (after each socket read or write), several times per
# request. Requests rarely hold it for 1 ms, so shorter turns cost them nothing
# (docs/design/admission-performance.md).
SWITCH_INTERVAL = 0.001


def tune_interpreter() -> None:
    """Shorter GIL turns, and the objects of start-up kept out of every full
    garbage collection: modules, the app and its clients never become
    garbage, yet each gen2 collection walked them all, with every thread
    stopped (docs/design/admission-performance.md)."""
    sys.setswitchinterval(SWITCH_INTERVAL)
    gc.collect()  # what start-up left behind is freed, not frozen
    gc.freeze()


def _after_app_loaded(worker: Any) -> None:
    tune_interpreter()


def gunicorn_options(settings: Settings) -> dict[str, Any]:
    server = settings.server
    reloader = reloader_for(server.cert_file, server.key_file)

    def ssl_context(config: Any, default_ssl_context_factory: Any) -> Any:
        return reloader.context()

    host = f"[{server.address}]" if ":" in server.address else server.address
    options: dict[str, Any] = {
        "bind": [f"{host}:{server.port}"],
        "workers": 1,
        # gthread, with TLS handshakes and request reads moved off its threads.
        "worker_class": "webhook.front.FrontWorker",
        "threads": server.threads,
        "worker_connections": server.max_connections,
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
        "post_worker_init": _after_app_loaded,
    }
    return options
