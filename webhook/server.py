"""``nettraffic-webhook --config FILE``: the webhook under gunicorn over TLS."""

import argparse
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.config_file import load_settings
from kubectl_nettraffic.errors import NetTrafficError
from webhook.gunicorn_conf import gunicorn_options


def _webhook_app(settings: Settings) -> Any:
    from kubectl_nettraffic.serving import start_serving
    from webhook.app import create_app

    return create_app(settings, start_serving(settings))


class WebhookServer(BaseApplication):  # type: ignore[misc]
    """gunicorn with our settings; ``app_factory`` runs in the worker after the
    fork, so its threads and the refresher process it spawns belong to the worker."""

    def __init__(
        self, settings: Settings, app_factory: Callable[[Settings], Any] = _webhook_app
    ) -> None:
        self.settings = settings
        self.app_factory = app_factory
        super().__init__()

    def load_config(self) -> None:
        for key, value in gunicorn_options(self.settings).items():
            if key in self.cfg.settings and value is not None:
                self.cfg.set(key, value)

    def load(self) -> Any:
        return self.app_factory(self.settings)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nettraffic-webhook",
        description="Network-aware pod placement webhook (TLS, gunicorn).",
    )
    parser.add_argument(
        "--config", default=os.environ.get("NETTRAFFIC_CONFIG"), help="config file (YAML)"
    )
    parser.add_argument("--port", type=int, help="override server.port")
    parser.add_argument("--address", help="override server.address")
    parser.add_argument("--cert-file", help="override server.certFile")
    parser.add_argument("--key-file", help="override server.keyFile")
    parser.add_argument("--prometheus-url", help="override prometheus.url")
    args = parser.parse_args(argv)
    try:
        settings = load_settings(
            args.config,
            {
                "server.port": args.port,
                "server.address": args.address,
                "server.certFile": args.cert_file,
                "server.keyFile": args.key_file,
                "prometheus.url": args.prometheus_url,
            },
        )
        for path, key in (
            (settings.server.cert_file, "certFile"),
            (settings.server.key_file, "keyFile"),
        ):
            if not os.path.isfile(path):
                raise NetTrafficError(
                    f"server.{key} {path!r} does not exist; create it with "
                    "kubectl nettraffic certs create --out-dir DIR, or mount the TLS Secret there"
                )
    except NetTrafficError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    logging.basicConfig(
        level=settings.server.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        stream=sys.stderr,
    )
    WebhookServer(settings).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
