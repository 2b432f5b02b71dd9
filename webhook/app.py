"""The HTTP server: a thin flask layer over the engine.

``create_app(settings, serving)`` builds the app over the serving objects
(kubectl_nettraffic.serving: ``start_serving`` in production, inside the
gunicorn worker; ``serving_parts`` fed by hand in tests). Every request handler
answers JSON; bad input gets 400/413/415 with a message that says what to
fix; nothing ever answers a traceback, and /mutate never denies a pod.
"""

import logging
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.measuring.scoreview import (
    diagnostics_document,
    pairs_age,
    peer_read_failures,
    scores_document,
    workloads_document,
)
from kubectl_nettraffic.serving import Serving
from webhook import admission, extender
from webhook.admission import HttpInputError
from webhook.framing import body_too_large_message, error_document
from webhook.mutate import Admissions, MutateFastPath
from webhook.request_counter import RequestCounter
from webhook.tls import CertReloader, reloader_for
from webhook.webhook_metrics import MUTATE, WebhookMetrics

log = logging.getLogger("nettraffic.webhook")

# Paths whose answers the app counts itself (see RequestCounter).
SELF_COUNTED = frozenset({MUTATE})


def _json(body: Any, status: int = 200) -> Response:
    return Response(admission.ENCODER.encode(body), status=status, mimetype="application/json")


def _error(message: str, status: int) -> Response:
    return _json(error_document(request.path, message), status)


def _read_body() -> bytes:
    """The body of a JSON request; 415 for any other media type."""
    content_type = request.environ.get("CONTENT_TYPE", "")
    # The media type before any parameters (charset=...), as werkzeug's
    # request.mimetype gives it, without parsing the parameters on every call.
    # (The API server sends exactly "application/json": no parsing for it.)
    if (
        content_type != "application/json"
        and content_type.partition(";")[0].strip().lower() != "application/json"
    ):
        raise HttpInputError(
            f"Content-Type {content_type or '(none)'!r} is not supported; send application/json",
            status=415,
        )
    return request.get_data(cache=False)  # raises 413 past MAX_CONTENT_LENGTH


def _read_json_body() -> Any:
    return admission.decode_json(_read_body())


def create_app(settings: Settings, serving: Serving) -> Flask:
    """The webhook's routes over ``serving``'s parts (started elsewhere)."""
    cert = reloader_for(settings.server.cert_file, settings.server.key_file)
    metrics = WebhookMetrics(serving, cert)
    app = Flask("nettraffic-webhook")
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_request_bytes
    _add_error_handlers(app, settings, metrics)
    admissions = Admissions(serving, metrics)
    _add_admission(app, admissions)
    _add_extender(app, serving, metrics)
    _add_views(app, serving, cert, metrics)
    routes = frozenset(rule.rule for rule in app.url_map.iter_rules())
    app.wsgi_app = MutateFastPath(  # type: ignore[method-assign]
        RequestCounter(app.wsgi_app, metrics.requests, routes, SELF_COUNTED),
        admissions,
        settings.server.max_request_bytes,
    )
    # Found by the gunicorn worker's front (front.py), which counts into it.
    setattr(app, "connections_closed", metrics.connections_closed)  # noqa: B010
    return app


def _add_error_handlers(app: Flask, settings: Settings, metrics: WebhookMetrics) -> None:
    """Every error as a JSON answer with its status, never a traceback."""

    def _failed(message: str, status: int) -> Response:
        """An error answer, counted here for the paths RequestCounter lets through."""
        if request.path in SELF_COUNTED:
            metrics.requests.inc(request.path, str(status))
        return _error(message, status)

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException) -> Response:
        # (Under gunicorn the front answers an oversized body itself, draining
        # it first; this 413 is for a request that reaches the app some other way.)
        messages = {
            413: body_too_large_message(settings.server.max_request_bytes),
            404: f"no endpoint {request.path}; see /mutate, /scheduler/filter, /scheduler/prioritize, /scores, /workloads",
            405: f"{request.method} is not allowed on {request.path}",
        }
        return _failed(
            messages.get(error.code or 500, error.description or "error"), error.code or 500
        )

    @app.errorhandler(HttpInputError)
    def _input_error(error: HttpInputError) -> Response:
        log.info("bad request to %s: %s", request.path, error)
        return _failed(str(error), error.status)

    @app.errorhandler(Exception)
    def _unexpected(error: Exception) -> Response:
        log.exception("unexpected error on %s", request.path)
        return _failed("internal error; see the webhook's log", 500)


def _add_admission(app: Flask, admissions: Admissions) -> None:
    """POST /mutate through flask: what MutateFastPath passes on (every call
    on the admission path costs; see docs/design/admission-performance.md)."""

    # No automatic OPTIONS answer: every answer of /mutate is an admission or
    # goes through the error handlers, which is where it is counted (SELF_COUNTED).
    @app.post(MUTATE, provide_automatic_options=False)
    def mutate() -> Response:
        # content_type, not mimetype: the same header, without werkzeug working it out.
        return Response(admissions.answer(_read_body()), content_type="application/json")


def _add_extender(app: Flask, serving: Serving, metrics: WebhookMetrics) -> None:
    """The scheduler extender's filter and prioritize."""
    board = serving.scoreboard

    def _extender_call(verb: str, answer: Callable[[extender.ExtenderArgs, bool], Any]) -> Response:
        args = extender.parse_args(_read_json_body())
        stale = board.is_stale(board.snapshot)
        if stale:
            log.warning("extender %s: scores missing or stale; expressing no opinion", verb)
        metrics.extender.inc(verb, "degraded" if stale else "ok")
        return _json(answer(args, stale))

    @app.post("/scheduler/filter")
    def scheduler_filter() -> Response:
        def answer(args: extender.ExtenderArgs, stale: bool) -> Any:
            failed = serving.extender_filter(args.pod, args.names(), args.node_objects or [], stale)
            return extender.filter_result(args, failed)

        return _extender_call("filter", answer)

    @app.post("/scheduler/prioritize")
    def scheduler_prioritize() -> Response:
        def answer(args: extender.ExtenderArgs, stale: bool) -> Any:
            return extender.priorities(serving.extender_scores(args.pod, args.names(), stale))

        return _extender_call("prioritize", answer)


def _add_views(app: Flask, serving: Serving, cert: CertReloader, metrics: WebhookMetrics) -> None:
    """What people and probes read: /scores, /workloads, /healthz, /readyz, /metrics."""
    board, inflight = serving.scoreboard, serving.inflight

    @app.get("/scores")
    def scores() -> Response:
        snapshot = board.snapshot
        if snapshot is None:
            return _error("no scores yet; the first refresh has not finished (see /readyz)", 503)
        document: dict[str, Any] = dict(
            scores_document(snapshot, inflight.view(), board.is_stale(snapshot))
        )
        if request.args.get("diagnostics") in ("1", "true"):
            document["diagnostics"] = diagnostics_document(snapshot)
        return _json(document)

    @app.get("/workloads")
    def workloads() -> Response:
        snapshot = board.snapshot
        if snapshot is None:
            return _error("no scores yet; the first refresh has not finished (see /readyz)", 503)
        return _json(workloads_document(snapshot, serving.settings.peers.cross_zone_price_per_gb))

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        snapshot = board.snapshot
        status = cert.status()
        body: dict[str, Any] = {
            "ready": snapshot is not None,
            "snapshotAgeSeconds": round(snapshot.age(board.clock()), 3) if snapshot else None,
            "stale": board.is_stale(snapshot),
            "certificate": {
                "served": status.served,
                "onDisk": status.on_disk,
                "inSync": status.in_sync,
            },
        }
        age = pairs_age(snapshot)
        if age is not None:  # a flow source is set: its pairs' state
            learned = snapshot.learned if snapshot else None
            body["peers"] = {
                "pairsAgePasses": age,
                "pulling": bool(learned and learned.pulling is not None),
                "failedReads": dict(peer_read_failures(snapshot)),
            }
        return _json(body, 200 if snapshot is not None else 503)

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        return Response(metrics.registry.expose(), mimetype="text/plain; version=0.0.4")
