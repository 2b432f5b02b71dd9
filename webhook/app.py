"""The HTTP server: a thin flask layer over the engine.

``create_app(settings, serving)`` builds the app over the serving objects
(kubectl_nettraffic.serving: ``start_serving`` in production, inside the
gunicorn worker; ``serving_parts`` fed by hand in tests). Every request handler
answers JSON; bad input gets 400/413/415 with a message that says what to
fix; nothing ever answers a traceback, and /mutate never denies a pod.
"""

import logging
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.measuring.scoreview import (
    diagnostics_document,
    scores_document,
    workloads_document,
)
from kubectl_nettraffic.serving import Serving
from webhook import admission, extender
from webhook.admission import HttpInputError
from webhook.framing import body_too_large_message, error_document
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


def _read_json_body() -> Any:
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
    raw = request.get_data(cache=False)  # raises 413 past MAX_CONTENT_LENGTH
    return admission.decode_json(raw)


def create_app(settings: Settings, serving: Serving) -> Flask:
    """The webhook's routes over ``serving``'s parts (started elsewhere)."""
    cert = reloader_for(settings.server.cert_file, settings.server.key_file)
    metrics = WebhookMetrics(serving.scoreboard, cert, serving.bindings)
    app = Flask("nettraffic-webhook")
    app.config["MAX_CONTENT_LENGTH"] = settings.server.max_request_bytes
    _add_error_handlers(app, settings, metrics)
    _add_admission(app, serving, metrics)
    _add_extender(app, settings, serving, metrics)
    _add_views(app, serving, cert, metrics)
    routes = frozenset(rule.rule for rule in app.url_map.iter_rules())
    app.wsgi_app = RequestCounter(  # type: ignore[method-assign]
        app.wsgi_app, metrics.requests, routes, SELF_COUNTED
    )
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


def _add_admission(app: Flask, serving: Serving, metrics: WebhookMetrics) -> None:
    """POST /mutate: the admission path (every call on it costs; see
    docs/design/admission-performance.md)."""
    steerer, namespaces = serving.steerer, serving.namespaces
    # The log level is set once, at start-up: asked once, not on every admission.
    debug = log.isEnabledFor(logging.DEBUG)

    # No automatic OPTIONS answer: every answer of /mutate is an admission or
    # goes through the error handlers, which is where it is counted (SELF_COUNTED).
    @app.post(MUTATE, provide_automatic_options=False)
    def mutate() -> Response:
        started = time.perf_counter()
        review = admission.parse_review(_read_json_body())
        try:
            outcome, answer = _admit(review)
        except Exception:
            # Never block a pod: anything unexpected means "allow unchanged".
            log.exception(
                "uid=%s pod=%s/%s: decision failed; allowing unchanged",
                review.uid,
                review.namespace,
                review.pod_name(),
            )
            outcome = "error"
            answer = admission.answer(
                review, warnings=["nettraffic: internal error; pod not steered"]
            )
        metrics.admissions.observe(time.perf_counter() - started, outcome)
        # content_type, not mimetype: the same header, without werkzeug working it out.
        return Response(answer, content_type="application/json")

    def _admit(review: admission.Review) -> tuple[str, str]:
        """The outcome of one admission and its answer."""
        if not review.is_pod_create or review.obj is None:
            return "ignored", admission.answer(review)
        labels = namespaces.get(review.namespace) if namespaces is not None else None
        decision = steerer.decide(review.obj, labels, review.dry_run)
        if decision.preferences:
            outcome = "mutated"
            # DEBUG, not INFO: the decision is on the pod itself (annotations) and
            # in /metrics, and a log line per admission costs about as much as the decision.
            if debug:
                log.debug(
                    "uid=%s pod=%s/%s preferred=%s dryRun=%s",
                    review.uid,
                    review.namespace,
                    review.pod_name(),
                    ",".join(p.node for p in decision.preferences),
                    review.dry_run,
                )
        else:
            outcome = "skipped"
            metrics.skips.inc(decision.skip or "unknown")
            if debug:
                log.debug(
                    "uid=%s pod=%s/%s skipped=%s",
                    review.uid,
                    review.namespace,
                    review.pod_name(),
                    decision.skip,
                )
        return outcome, admission.answer(review, decision.patch, decision.warnings)


def _add_extender(
    app: Flask, settings: Settings, serving: Serving, metrics: WebhookMetrics
) -> None:
    """The scheduler extender's filter and prioritize."""
    board, inflight, steerer = serving.scoreboard, serving.inflight, serving.steerer

    def _extender_call(verb: str, answer: Callable[[extender.ExtenderArgs, bool], Any]) -> Response:
        args = extender.parse_args(_read_json_body())
        stale = board.is_stale(board.snapshot)
        if stale:
            log.warning("extender %s: scores missing or stale; expressing no opinion", verb)
        metrics.extender.inc(verb, "degraded" if stale else "ok")
        return _json(answer(args, stale))

    @app.post("/scheduler/filter")
    def scheduler_filter() -> Response:
        return _extender_call(
            "filter",
            lambda args, stale: extender.filter_nodes(
                args, board.snapshot, stale, steerer.selector, settings.extender
            ),
        )

    @app.post("/scheduler/prioritize")
    def scheduler_prioritize() -> Response:
        def answer(args: extender.ExtenderArgs, stale: bool) -> Any:
            snapshot = board.snapshot
            booked = inflight.view() if snapshot else {}
            return extender.prioritize(args, snapshot, stale, booked)

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
        return _json(workloads_document(snapshot))

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        snapshot = board.snapshot
        status = cert.status()
        body = {
            "ready": snapshot is not None,
            "snapshotAgeSeconds": round(snapshot.age(board.clock()), 3) if snapshot else None,
            "stale": board.is_stale(snapshot),
            "certificate": {
                "served": status.served,
                "onDisk": status.on_disk,
                "inSync": status.in_sync,
            },
        }
        return _json(body, 200 if snapshot is not None else 503)

    @app.get("/metrics")
    def prometheus_metrics() -> Response:
        return Response(metrics.registry.expose(), mimetype="text/plain; version=0.0.4")
