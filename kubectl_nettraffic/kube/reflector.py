"""List + watch of one collection, as client-go's reflector does it.

Watches read the JSON event stream themselves, so that a ``410 Gone`` (the
watch's resourceVersion fell out of etcd's window) and dropped connections
are handled as client-go handles them: list again, then watch from the
list's resourceVersion. Readers of a cache never wait for the API server.
"""

import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kubectl_nettraffic.kube.client import API_ERRORS, describe_api_error, request, request_json

log = logging.getLogger(__name__)

T = TypeVar("T")

# How long one watch request stays open before we re-open it; the API server
# ends watches after its own --min-request-timeout (default 1800s) anyway.
WATCH_SECONDS = 300

# Back-off after a failed list; short enough to recover quickly, long enough
# not to hammer an API server that is restarting.
RETRY_SECONDS = 2.0


class Reflector:
    """List, then watch from the list's resourceVersion, for ever: one
    collection (``path``, e.g. ``/api/v1/nodes``) handed to a subclass
    object by object. A 410 Gone, a watch ERROR or a dropped connection
    means a fresh list, as client-go's reflector does.

    Subclasses say what a list (``_replace``), an added or modified object
    (``_upsert``) and a deleted one (``_remove``) mean to them.
    """

    def __init__(self, api: k8s.ApiClient, path: str, kind: str, label_selector: str = "") -> None:
        self._api = api
        self._path = path
        self._kind = kind
        self._label_selector = label_selector or None
        self._stop = threading.Event()
        self.synced = threading.Event()
        self.relists = 0
        self.last_error: str | None = None
        self._thread: threading.Thread | None = None

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        raise NotImplementedError

    def _upsert(self, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _remove(self, obj: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def start(self) -> "Reflector":
        self._thread = threading.Thread(target=self._run, name=f"watch-{self._kind}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _list(self) -> str:
        document = request_json(
            self._api, "GET", self._path, query={"labelSelector": self._label_selector}
        )
        self._replace(list(document.get("items") or []))
        self.relists += 1
        self.synced.set()
        return str((document.get("metadata") or {}).get("resourceVersion") or "")

    def _lines(self, resource_version: str) -> Iterator[bytes]:
        """The watch's events as the API server writes them: one JSON line each."""
        response = request(
            self._api,
            "GET",
            self._path,
            query={
                "labelSelector": self._label_selector,
                "watch": "true",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": WATCH_SECONDS,
            },
        )
        try:
            buffer = b""
            for chunk in response.stream(amt=65536, decode_content=True):
                if self._stop.is_set():
                    return
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
        finally:
            response.release_conn()

    def _decode(self, line: bytes) -> dict[str, Any] | None:
        """One watch event from its JSON line; None: an event known to change nothing."""
        event: dict[str, Any] = json.loads(line)
        return event

    def receive(self, line: bytes) -> str | None:
        """One line of a watch: decoded (unless known to change nothing) and
        applied. Its resourceVersion; "" when skipped; None to re-list."""
        event = self._decode(line)
        return "" if event is None else self._apply(event)

    def _apply(self, event: Mapping[str, Any]) -> str | None:
        """Apply one event; return its resourceVersion, or None to re-list."""
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            # 410 Gone: our resourceVersion is too old. Any other error: re-list too.
            log.info("watch of %s ended with %s; re-listing", self._kind, obj.get("code"))
            return None
        if kind in ("ADDED", "MODIFIED"):
            self._upsert(obj)
        elif kind == "DELETED":
            self._remove(obj)
        return str((obj.get("metadata") or {}).get("resourceVersion") or "")

    def _run(self) -> None:
        resource_version: str | None = None
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._list()
                    self.last_error = None
                for line in self._lines(resource_version):
                    next_version = self.receive(line)
                    if next_version is None:
                        resource_version = None
                        break
                    resource_version = next_version or resource_version
            except ApiException as error:
                if error.status == 410:
                    resource_version = None
                    continue
                self.last_error = str(describe_api_error(error, f"watching {self._kind}"))
                log.warning("%s", self.last_error)
                resource_version = None
                self._stop.wait(RETRY_SECONDS)
            except API_ERRORS as error:  # disconnects, timeouts, bad JSON
                self.last_error = str(describe_api_error(error, f"watching {self._kind}"))
                log.warning("%s; re-listing", self.last_error)
                resource_version = None
                self._stop.wait(RETRY_SECONDS)
            except Exception as error:  # a bug of ours: said as one, and the watch goes on
                self.last_error = f"watching {self._kind}: {error.__class__.__name__}: {error}"
                log.exception("watching %s failed; re-listing", self._kind)
                resource_version = None
                self._stop.wait(RETRY_SECONDS)


class ListWatchCache(Reflector, Generic[T]):
    """A name -> value cache of one cluster-scoped resource, kept by list + watch.

    ``parse`` turns one JSON object into the cached value.
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        path: str,
        parse: Callable[[Mapping[str, Any]], T],
        kind: str,
        label_selector: str = "",
    ) -> None:
        super().__init__(api, path, kind, label_selector)
        self._parse = parse
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()

    def items(self) -> dict[str, T]:
        with self._lock:
            return dict(self._items)

    def get(self, name: str) -> T | None:
        with self._lock:
            return self._items.get(name)

    def start(self) -> "ListWatchCache[T]":
        super().start()
        return self

    def _replace(self, objects: list[Mapping[str, Any]]) -> None:
        fresh = {obj["metadata"]["name"]: self._parse(obj) for obj in objects}
        with self._lock:
            self._items = fresh

    def _upsert(self, obj: Mapping[str, Any]) -> None:
        value = self._parse(obj)
        with self._lock:
            self._items[obj["metadata"]["name"]] = value

    def _remove(self, obj: Mapping[str, Any]) -> None:
        with self._lock:
            self._items.pop((obj.get("metadata") or {}).get("name", ""), None)
