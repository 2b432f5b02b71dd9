"""The ceiling of this stack: a bare flask app under the same gunicorn, worker
and TLS settings as the webhook, answering every AdmissionReview with a fixed
patch. ``python -m bench.bare_app --config FILE`` (the webhook's config file)."""

import argparse
import base64
import json

from flask import Flask, Response, request

from kubectl_nettraffic.config_file import load_settings
from webhook.server import WebhookServer

PATCH = base64.b64encode(
    json.dumps(
        [
            {
                "op": "add",
                "path": "/spec/affinity",
                "value": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "preference": {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": ["node-1"],
                                        }
                                    ]
                                },
                            }
                        ]
                    }
                },
            },
        ]
    ).encode()
).decode()


def create_bare_app() -> Flask:
    app = Flask("bare")

    @app.post("/mutate")
    def mutate() -> Response:
        review = json.loads(request.get_data())
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": review["kind"],
            "response": {
                "uid": review["request"]["uid"],
                "allowed": True,
                "patchType": "JSONPatch",
                "patch": PATCH,
            },
        }
        return Response(json.dumps(answer), mimetype="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response('{"status": "ok"}', mimetype="application/json")

    return app


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    settings = load_settings(args.config, {"server.port": args.port})
    WebhookServer(settings, lambda _: create_bare_app()).run()


if __name__ == "__main__":
    main()
