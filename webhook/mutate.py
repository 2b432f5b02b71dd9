"""POST /mutate: from the body's bytes to the AdmissionReview answer.

``Admissions.answer`` is the admission itself, whichever way the request came
in. ``MutateFastPath`` serves a well-formed admission straight from the WSGI
environ, beneath flask: flask's request and app contexts, routing, request
and response objects cost more per admission than our decision does (about
50 µs warm, in-process; docs/design/admission-performance.md). Anything it
does not take as is goes on to flask's /mutate route, which answers it the
same way and owns every error answer, so there is one place that says what
a bad request gets.
"""

import io
import logging
import time
from collections.abc import Iterable
from typing import Any

from kubectl_nettraffic.serving import Serving
from webhook import admission
from webhook.request_counter import StartResponse, WsgiApp
from webhook.webhook_metrics import MUTATE, WebhookMetrics

log = logging.getLogger("nettraffic.webhook")

JSON_HEADER = ("Content-Type", "application/json")


class Admissions:
    """Every admission's decision, answer and metrics."""

    def __init__(self, serving: Serving, metrics: WebhookMetrics) -> None:
        self.steerer, self.namespaces = serving.steerer, serving.namespaces
        self.metrics = metrics
        # The log level is set once, at start-up: asked once, not on every admission.
        self.debug = log.isEnabledFor(logging.DEBUG)

    def answer(self, body: bytes) -> str:
        """The answer to the AdmissionReview in ``body``; HttpInputError if it
        is not one. A decision that fails allows the pod unchanged."""
        started = time.perf_counter()
        review = admission.parse_review(admission.decode_json(body))
        try:
            outcome, answer = self._admit(review)
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
        self.metrics.admissions.observe(time.perf_counter() - started, outcome)
        return answer

    def _admit(self, review: admission.Review) -> tuple[str, str]:
        """The outcome of one admission and its answer."""
        if not review.is_pod_create or review.obj is None:
            return "ignored", admission.answer(review)
        namespaces = self.namespaces
        labels = namespaces.get(review.namespace) if namespaces is not None else None
        decision = self.steerer.decide(review.obj, labels, review.dry_run)
        if decision.preferences:
            outcome = "mutated"
            # DEBUG, not INFO: the decision is on the pod itself (annotations) and
            # in /metrics, and a log line per admission costs about as much as the decision.
            if self.debug:
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
            self.metrics.skips.inc(decision.skip or "unknown")
            if self.debug:
                log.debug(
                    "uid=%s pod=%s/%s skipped=%s",
                    review.uid,
                    review.namespace,
                    review.pod_name(),
                    decision.skip,
                )
        return outcome, admission.answer(review, decision.patch_json(), decision.warnings)


class MutateFastPath:
    """WSGI middleware answering the API server's admissions before flask.

    It takes a request only as the API server sends one: POST /mutate,
    ``Content-Type: application/json`` exactly, a Content-Length within
    ``max_bytes``. Every other request, and any body that is not a valid
    AdmissionReview, goes to ``wsgi_app`` (flask) with the bytes read so far
    handed back, where the /mutate route answers it as it always did (400,
    413, 415, 405, each counted; a decision that fails still allows the pod).
    """

    def __init__(self, wsgi_app: WsgiApp, admissions: Admissions, max_bytes: int) -> None:
        self.wsgi_app, self.admissions, self.max_bytes = wsgi_app, admissions, max_bytes

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if (
            environ.get("PATH_INFO") != MUTATE
            or environ.get("REQUEST_METHOD") != "POST"
            or environ.get("CONTENT_TYPE") != "application/json"
        ):
            return self.wsgi_app(environ, start_response)
        length = environ.get("CONTENT_LENGTH", "")
        if not (length.isascii() and length.isdigit()) or int(length) > self.max_bytes:
            return self.wsgi_app(environ, start_response)
        body = environ["wsgi.input"].read(int(length))
        try:
            data = self.admissions.answer(body).encode()
        except admission.HttpInputError:
            # Not an AdmissionReview: flask's route reads the same bytes and
            # answers them as it answers every bad request.
            environ["wsgi.input"] = io.BytesIO(body)
            return self.wsgi_app(environ, start_response)
        start_response("200 OK", [JSON_HEADER, ("Content-Length", str(len(data)))])
        return (data,)
