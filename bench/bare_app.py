"""The ceiling of this stack: a bare flask app under the same gunicorn, worker
and TLS settings as the webhook, answering every AdmissionReview with a fixed
patch. ``python -m bench.bare_app --config FILE`` (the webhook's config file).

With ``--no-flask``, the same answer from a bare WSGI callable: the floor
beneath flask, where the webhook answers the API server's admissions
(webhook.mutate.MutateFastPath).
"""

import argparse
import base64
import json
from collections.abc import Callable, Iterable
from typing import Any

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


def fixed_answer(body: bytes) -> str:
    review = json.loads(body)
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
    return json.dumps(answer)


def create_bare_app() -> Flask:
    app = Flask("bare")

    @app.post("/mutate")
    def mutate() -> Response:
        return Response(fixed_answer(request.get_data()), mimetype="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response('{"status": "ok"}', mimetype="application/json")

    return app


def bare_wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """The fixed answer without flask: /healthz and POST /mutate, nothing else."""
    if environ.get("PATH_INFO") == "/healthz":
        data = b'{"status": "ok"}'
    else:
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        data = fixed_answer(body).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return (data,)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--no-flask", action="store_true", help="a bare WSGI callable instead")
    args = parser.parse_args()
    settings = load_settings(args.config, {"server.port": args.port})
    app: Any = bare_wsgi_app if args.no_flask else create_bare_app()
    WebhookServer(settings, lambda _: app).run()


if __name__ == "__main__":
    main()
