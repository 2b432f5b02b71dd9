"""Clients that misbehave on purpose, over raw sockets to 127.0.0.1: they
open connections and never send, stall their TLS handshake half-way, or
trickle their request's header section or body in a byte at a time.

``SlowClients`` runs them from one thread and stops by itself after
``duration`` seconds (or at ``stop()``); every socket is closed then. It
records when the server closed each connection, so a test can check that
stalled connections are closed within a bound.
"""

import contextlib
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass, field

KINDS = ("idle", "handshake", "headers", "body")
# How often each connection is checked for a close by the server: how late a
# close time may be noticed.
PROBE_INTERVAL = 0.1


def client_hello(server_name: str = "localhost") -> bytes:
    """The first flight of a real TLS client, produced without a server."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def admission_request(body: bytes, path: str = "/mutate") -> tuple[bytes, bytes]:
    """The header section and body of a POST, as the API server sends it."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head, body


@dataclass
class Trickle:
    """One misbehaving connection: what it has left to send, a byte at a time."""

    kind: str
    sock: socket.socket | ssl.SSLSocket
    opened: float
    pending: bytes = b""
    closed_by_server: float | None = None
    sent: int = 0


@dataclass
class SlowClients:
    port: int
    per_kind: dict[str, int]
    interval: float = 1.0  # seconds between two trickled bytes
    duration: float = 30.0  # stops by itself after this
    reconnect: bool = False  # open a new one when the server closes one
    handshake_timeout: float = 5.0  # past it, a TLS kind stays stalled mid-handshake
    connections: list[Trickle] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self.stopped = float("inf")
        self._lock = threading.Lock()
        self._hello = client_hello()
        self._context = ssl.create_default_context()
        self._context.check_hostname, self._context.verify_mode = False, ssl.CERT_NONE
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
        self._head, self._body = admission_request(body.encode())
        for kind, count in self.per_kind.items():
            assert kind in KINDS, kind
            for _ in range(count):
                self.connections.append(self._open(kind))
        self._thread = threading.Thread(target=self._run, name="slow-clients", daemon=True)
        self._thread.start()

    def _open(self, kind: str) -> Trickle:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        if kind == "idle":
            return Trickle(kind, raw, time.monotonic())
        if kind == "handshake":
            half = len(self._hello) // 2
            raw.sendall(self._hello[:half])
            return Trickle(kind, raw, time.monotonic(), self._hello[half:])
        try:
            raw.settimeout(self.handshake_timeout)
            tls = self._context.wrap_socket(raw, server_hostname="localhost")
        except (OSError, ssl.SSLError):
            # The server did not finish the handshake (its threads are all
            # held, say): this one is stalled mid-handshake, like it or not.
            raw.close()
            raw = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            raw.sendall(self._hello[: len(self._hello) // 2])
            return Trickle("handshake", raw, time.monotonic())
        if kind == "headers":
            return Trickle(kind, tls, time.monotonic(), self._head + self._body)
        tls.sendall(self._head + self._body[:1])
        return Trickle(kind, tls, time.monotonic(), self._body[1:])

    def _run(self) -> None:
        deadline = time.monotonic() + self.duration
        next_byte = time.monotonic()
        while not self._stop.is_set() and time.monotonic() < deadline:
            send = time.monotonic() >= next_byte
            if send:
                next_byte += self.interval
            with self._lock:
                for trickle in list(self.connections):
                    if trickle.closed_by_server is None:
                        self._advance(trickle, send)
            self._stop.wait(PROBE_INTERVAL)
        self.stopped = time.monotonic()
        self._close_all()

    def _advance(self, trickle: Trickle, send: bool) -> None:
        """Note a close by the server, else send the next byte, if any and if ``send``."""
        try:
            trickle.sock.settimeout(0.01)
            try:
                if isinstance(trickle.sock, ssl.SSLSocket):
                    data = trickle.sock.recv(1)
                else:
                    data = trickle.sock.recv(1, socket.MSG_PEEK)
                if not data:
                    raise ConnectionResetError("closed by the server")
            except (TimeoutError, ssl.SSLWantReadError, BlockingIOError):
                pass  # nothing to read: still open
            if send and trickle.pending:
                trickle.sock.send(trickle.pending[:1])
                trickle.pending = trickle.pending[1:]
                trickle.sent += 1
        except (OSError, ssl.SSLError):
            trickle.closed_by_server = time.monotonic()
            if self.reconnect and not self._stop.is_set():
                with contextlib.suppress(OSError):
                    self.connections.append(self._open(trickle.kind))

    def open_count(self) -> int:
        with self._lock:
            return sum(1 for t in self.connections if t.closed_by_server is None)

    def close_times(self) -> list[float]:
        """Seconds from open to the server's close, for each closed connection."""
        with self._lock:
            return [
                t.closed_by_server - t.opened
                for t in self.connections
                if t.closed_by_server is not None
            ]

    def longest_open(self) -> float:
        """The longest any connection stayed open, closed by the server or
        still open when these clients stopped (call after ``stop``)."""
        with self._lock:
            return max((t.closed_by_server or self.stopped) - t.opened for t in self.connections)

    def _close_all(self) -> None:
        with self._lock:
            for trickle in self.connections:
                with contextlib.suppress(OSError):
                    trickle.sock.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
