"""The webhook's gunicorn worker: each request is read whole before a thread
answers it.

gunicorn's gthread worker hands a connection to a thread as soon as it is
readable; the thread then does the TLS handshake and reads the request with
blocking calls and no deadline. A few clients that trickle a request in, or
stall their handshake, hold every thread, and every admission waits behind
them until the API server gives up (issue 22). Here the worker's own event
loop, which gthread already runs to accept connections, does that part
without blocking: the handshake, and the request up to its last body byte
(webhook.framing says where that is). A thread gets a connection only when
its whole request is in memory, so the threads answer admissions and nothing
else, whatever the clients do.

Bounds, all from ``server`` settings:
- ``requestTimeout``: a connection must finish its handshake and its request
  within it (from accept, or from a kept-alive connection's first byte);
  past it, it is closed. The loop checks at least once a second.
- ``maxPendingConnections``: connections still being read; one more closes
  the oldest of them, so a flood of stalled ones cannot shut out new ones.
- ``maxConnections`` (gunicorn's worker_connections): at the limit, the
  longest-idle kept-alive connection is closed to make room, instead of
  new connections waiting for one to time out.
- a header section past 64 KiB, a chunked body or a body past
  ``maxRequestBytes`` are answered here (431, 411, 413) and closed.
- a thread's write of an answer times out after ``requestTimeout`` too, so a
  client that never reads its answer does not keep the thread.
- a connection that closes lingers here, off the threads and off the loop's
  time, to read what its client still sends (gthread's own graceful close
  blocks the loop for up to 2 s).
Closes are counted in ``nettraffic_connections_closed_total{reason}``.
"""

import contextlib
import errno
import json
import logging
import selectors
import socket
import ssl
import time
from collections import deque
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn import sock as gunicorn_sock
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.framing import INCOMPLETE, Framing, error_document, frame
from webhook.metrics import Counter

log = logging.getLogger("nettraffic.front")


def connections_closed_counter() -> Counter:
    """What the front counts: the app's registry exposes one (webhook_metrics.py)."""
    return Counter(
        "nettraffic_connections_closed_total",
        "Connections the server closed before their request reached the app, by reason.",
        ("reason",),
    )


RECEIVE_BYTES = 256 * 1024
# A refused request's body is read and dropped up to this much, so its client
# receives the answer instead of a reset while it is still sending.
DRAIN_LIMIT = 64 * 2**20
LINGER_BYTES = 64 * 1024
STATUS_TEXT = {
    400: "Bad Request",
    411: "Length Required",
    413: "Content Too Large",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
}

HANDSHAKE, READ, LINGER = "handshake", "read", "linger"


class Visit:
    """One stay of a connection in the front, from start to hand-off or close."""

    __slots__ = ("conn", "deadline")

    def __init__(self, conn: "FrontConn", deadline: float) -> None:
        self.conn, self.deadline = conn, deadline


class FrontConn(TConn):  # type: ignore[misc]
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.buffer = bytearray()
        self.framing: Framing = INCOMPLETE
        self.phase = READ
        self.visit: Visit | None = None  # set while the front holds it
        self.waiting = False  # registered in the poller (and counted as pending)
        self.ready = False  # a whole request is buffered for a thread
        self.continued = False  # "100 Continue" sent for this request
        self.linger_left = 0  # bytes to drop before closing
        self.linger_close: Any = None  # set by the worker: close through the front

    def close(self, graceful: bool = False) -> None:
        if graceful and self.linger_close is not None:
            self.linger_close(self)
        else:
            super().close(graceful=False)


class FrontWorker(ThreadWorker):  # type: ignore[misc]
    """gthread, with the handshake and request reading moved to its event loop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        server = self.app.settings.server
        self.request_timeout: float = server.request_timeout
        self.max_pending: int = server.max_pending_connections
        self.max_body: int = server.max_request_bytes
        self.visits: deque[Visit] = deque()  # in order of deadline
        self.pending = 0  # connections waiting in the front's poller now
        # The app's counter once it is loaded (load_wsgi); this one until then,
        # or for an app that has none.
        self.connections_closed = connections_closed_counter()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        counter = getattr(self.wsgi, "connections_closed", None)
        if isinstance(counter, Counter):
            self.connections_closed = counter

    # ------------------------------------------------------------ entry points

    def accept(self, listener: socket.socket) -> None:
        try:
            client, address = listener.accept()
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = FrontConn(self.cfg, client, address, listener.getsockname())
        conn.linger_close = self._linger
        self._enter(conn)

    def enqueue_req(self, conn: FrontConn) -> None:
        """gthread calls this for new, kept-alive and pipelined connections:
        a thread gets one only with its whole request buffered."""
        if conn.ready:
            conn.ready = False
            super().enqueue_req(conn)
        else:
            self._enter(conn)

    def handle_request(self, req: Any, conn: FrontConn) -> Any:
        # After gthread's setblocking(True): the answer's writes get a deadline.
        conn.sock.settimeout(self.request_timeout)
        # The body is here already: the front sent "100 Continue" when the
        # client waited for it, and gunicorn's own would come after the body.
        req._expected_100_continue = False
        return super().handle_request(req, conn)

    def set_accept_enabled(self, enabled: bool) -> None:
        """gthread stops accepting at ``worker_connections``, until a connection
        closes: idle kept-alive ones may take 75 s. Before that, the
        longest-idle kept-alive connections are closed to make room, so a
        client holding many idle connections cannot shut new ones out."""
        if not enabled and self.alive:
            while self.nr_conns >= self.worker_connections and self.keepalived_conns:
                conn = self.keepalived_conns.popleft()
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self.poller.unregister(conn.sock)
                self.nr_conns -= 1
                conn.close()
                self.connections_closed.inc("evicted-idle")
            if self.nr_conns < self.worker_connections:
                return  # room made: keep accepting
        super().set_accept_enabled(enabled)

    def murder_pending(self) -> None:
        """gthread's loop calls this at least once a second: close what is overdue."""
        super().murder_pending()
        now = time.monotonic()
        while self.visits:
            visit = self.visits[0]
            if visit.conn.visit is visit and visit.deadline > now:
                break
            self.visits.popleft()
            if visit.conn.visit is visit:
                self._drop(visit.conn, "timeout" if visit.conn.phase != LINGER else None)

    # ------------------------------------------------------------ the front

    def _enter(self, conn: FrontConn) -> None:
        try:
            if not conn.initialized:
                if self.cfg.is_ssl:
                    conn.sock = gunicorn_sock.ssl_context(self.cfg).wrap_socket(
                        conn.sock,
                        server_side=True,
                        do_handshake_on_connect=False,
                        suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                    )
                    conn.phase = HANDSHAKE
            else:  # kept alive, or pipelined: what the parser read ahead comes first
                conn.buffer = bytearray(conn.parser.unreader.take_buffered())
                conn.phase = READ
            if conn.sock.getblocking():  # (a kept-alive one is non-blocking already)
                conn.sock.setblocking(False)
        except OSError as error:  # ssl.SSLError among them
            log.warning("closing a new connection: %s", error)
            self.nr_conns -= 1
            conn.close()
            return
        conn.visit = Visit(conn, time.monotonic() + self.request_timeout)
        # The usual kept-alive request is all there already: it is handed over
        # in this call, and never waits in the poller.
        self._step(conn)

    def _wait_for(self, conn: FrontConn, events: int) -> None:
        """Wait in the poller for ``events``; the first wait counts the
        connection as pending, and may evict the oldest pending one."""
        visit = conn.visit
        if visit is None:
            return  # closed meanwhile
        if conn.waiting:
            self.poller.modify(conn.sock, events, partial(self._step, conn))
            return
        if self.pending >= self.max_pending:
            self._evict_oldest()
        self.poller.register(conn.sock, events, partial(self._step, conn))
        conn.waiting = True
        self.pending += 1
        self.visits.append(visit)

    def _release(self, conn: FrontConn) -> None:
        conn.visit = None
        if conn.waiting:
            conn.waiting = False
            self.pending -= 1
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)

    def _evict_oldest(self) -> None:
        while self.visits:
            visit = self.visits.popleft()
            if visit.conn.visit is visit:
                self._drop(visit.conn, "evicted")
                return

    def _step(self, conn: FrontConn, _fileobj: Any = None) -> None:
        """Advance a connection as far as its socket allows, without blocking."""
        if conn.visit is None:
            return
        try:
            if conn.phase == HANDSHAKE:
                conn.sock.do_handshake()
                conn.phase = READ
            if conn.phase == READ:
                self._read(conn)
            else:
                self._drop_lingering(conn)
        except ssl.SSLWantReadError:
            self._wait_for(conn, selectors.EVENT_READ)
        except ssl.SSLWantWriteError:
            self._wait_for(conn, selectors.EVENT_WRITE)
        except BlockingIOError:
            self._wait_for(conn, selectors.EVENT_READ)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError, ConnectionError):
            self._drop(conn, None)  # the client closed, or went away
        except OSError as error:  # ssl.SSLError among them
            log.debug("connection from %s closed in the front: %s", conn.client, error)
            failed_handshake = conn.phase == HANDSHAKE and isinstance(error, ssl.SSLError)
            self._drop(conn, "tls-error" if failed_handshake else None)

    def _read(self, conn: FrontConn) -> None:
        """Receive until the socket has no more; raises SSLWantRead or
        BlockingIOError when it must wait, which _step turns into a wait."""
        while True:
            if self._judge(conn):
                return
            data = conn.sock.recv(RECEIVE_BYTES)
            if not data:  # the client closed before its request was whole
                self._drop(conn, None)
                return
            conn.buffer += data

    def _judge(self, conn: FrontConn) -> bool:
        """Act on what the buffer holds; True when the connection left the read phase."""
        if conn.framing.length is None:
            if not conn.buffer:
                return False
            conn.framing = frame(conn.buffer, self.max_body)
            if conn.framing.refused:
                self._refuse(conn, conn.framing)
                return True
        framing = conn.framing
        if framing.length is not None and len(conn.buffer) >= framing.length:
            self._hand_over(conn)
            return True
        if framing.expects_continue and not conn.continued:
            conn.continued = True
            conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        return False

    def _hand_over(self, conn: FrontConn) -> None:
        self._release(conn)  # (gthread's handle() makes the socket blocking again)
        if conn.parser is None:
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.initialized = conn.data_ready = True
        conn.parser.unreader.unread(bytes(conn.buffer))
        conn.buffer, conn.framing, conn.continued = bytearray(), INCOMPLETE, False
        conn.ready = True
        self.enqueue_req(conn)

    def _refuse(self, conn: FrontConn, framing: Framing) -> None:
        """Answer a request the front will not buffer, then close."""
        self.connections_closed.inc(f"refused-{framing.status}")
        log.info("refused a request to %r from %s: %s", framing.path, conn.client, framing.message)
        body = json.dumps(error_document(framing.path, framing.message)).encode()
        answer = (
            f"HTTP/1.1 {framing.status} {STATUS_TEXT[framing.status]}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode() + body
        try:
            conn.sock.send(answer)  # small: fits the socket's buffer in one send
        except OSError:
            self._drop(conn, None)
            return
        received_body = len(conn.buffer) - conn.buffer.find(b"\r\n\r\n") - 4
        left = framing.body_length - received_body if framing.body_length <= DRAIN_LIMIT else 0
        self._start_linger(conn, max(left, 0) + LINGER_BYTES)

    def _linger(self, conn: FrontConn) -> None:
        """gthread closes a connection after its answer (it is not kept alive):
        linger in the front to read what the client still sends, so the kernel
        does not reset the connection under the answer."""
        conn.ready = False
        try:
            conn.sock.setblocking(False)
        except OSError:
            FrontConn.close(conn)
            return
        self.nr_conns += 1  # gthread counted it closed; the front closes it
        conn.visit = Visit(conn, time.monotonic() + self.request_timeout)
        self._start_linger(conn, LINGER_BYTES)

    def _start_linger(self, conn: FrontConn, drop_bytes: int) -> None:
        conn.phase, conn.linger_left = LINGER, drop_bytes
        try:
            conn.sock.shutdown(socket.SHUT_WR)  # also leaves TLS: what follows is dropped unread
        except OSError:
            self._drop(conn, None)
            return
        self._wait_for(conn, selectors.EVENT_READ)

    def _drop_lingering(self, conn: FrontConn) -> None:
        while conn.linger_left > 0:
            data = conn.sock.recv(min(RECEIVE_BYTES, conn.linger_left))
            if not data:
                break
            conn.linger_left -= len(data)
        self._drop(conn, None)

    def _drop(self, conn: FrontConn, reason: str | None) -> None:
        """Close a connection the front holds; ``reason`` is counted when given."""
        if reason is not None:
            self.connections_closed.inc(reason)
            log.debug("closing connection from %s: %s", conn.client, reason)
        self._release(conn)
        self.nr_conns -= 1
        with contextlib.suppress(OSError):
            conn.sock.close()
