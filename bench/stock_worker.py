"""The webhook under gunicorn's own gthread worker instead of webhook.front's,
for bench.misbehaving_clients to show what the front changes.
``python -m bench.stock_worker --config FILE`` (the webhook's config file)."""

import argparse

from kubectl_nettraffic.config_file import load_settings
from webhook.server import WebhookServer


class StockWorkerServer(WebhookServer):
    def load_config(self) -> None:
        super().load_config()
        self.cfg.set("worker_class", "gthread")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    StockWorkerServer(load_settings(args.config, {"server.port": args.port})).run()


if __name__ == "__main__":
    main()
