"""WSGI middleware counting HTTP answers by path and status code."""

from collections.abc import Callable, Iterable
from typing import Any

from webhook.metrics import Counter

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class RequestCounter:
    """WSGI middleware counting answers by path and status code.

    It sees every answer, also those flask writes itself: a 405 on a route
    counts under that route (an after_request hook never sees those). Paths
    that are not routes share the label "other", so a
    scan of random URLs cannot grow the metric without bound.

    Paths in ``counted_by_app`` (/mutate) pass straight through: the app
    counts their answers itself, each admission with its outcome and latency
    in one call, and its errors in the error handlers: one wrapper call fewer
    on the admission path, where every call costs most.
    """

    def __init__(
        self,
        wsgi_app: WsgiApp,
        counter: Counter,
        routes: frozenset[str],
        counted_by_app: frozenset[str],
    ) -> None:
        self.wsgi_app, self.counter = wsgi_app, counter
        self.routes, self.counted_by_app = routes, counted_by_app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in self.counted_by_app:
            return self.wsgi_app(environ, start_response)
        label = path if path in self.routes else "other"

        def counted(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            self.counter.inc(label, status[:3])
            return start_response(status, headers, exc_info)

        return self.wsgi_app(environ, counted)
