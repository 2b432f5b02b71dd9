"""The library internals our code relies on, held to the shape it uses.

webhook/front.py subclasses gunicorn's gthread worker and reaches into it;
placement.py calls jsonpatch's private ``AddOperation._add``. setup.cfg bounds
both libraries to the releases checked here; these tests fail first when a
release inside those bounds (or a lock refresh) changes what we use, before
the server misbehaves under load.
"""

import inspect
import socket

import jsonpatch
from gunicorn import http
from gunicorn import sock as gunicorn_sock
from gunicorn.http.message import Message
from gunicorn.http.unreader import Unreader
from gunicorn.workers.gthread import TConn, ThreadWorker


def _parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


def test_gthread_connection_is_built_and_read_as_front_uses_it():
    assert _parameters(TConn.__init__)[:5] == ["self", "cfg", "sock", "client", "server"]
    left, right = socket.socketpair()
    conn = TConn(None, left, ("127.0.0.1", 1), ("127.0.0.1", 2))
    right.close()
    for attribute in ("sock", "client", "parser", "initialized"):
        assert hasattr(conn, attribute), attribute
    assert conn.parser is None and conn.initialized is False
    conn.close()
    assert left.fileno() == -1  # closing the connection closes its socket


def test_gthread_worker_has_the_hooks_and_state_front_overrides():
    for method in (
        "accept",
        "enqueue_req",
        "handle_request",
        "set_accept_enabled",
        "murder_pending",
    ):
        assert callable(getattr(ThreadWorker, method)), method
    assert _parameters(ThreadWorker.handle_request)[1:3] == ["req", "conn"]
    assert _parameters(ThreadWorker.accept)[1:2] == ["listener"]
    # Set in __init__ and read or changed by the front (a deque it pops from the left).
    source = inspect.getsource(ThreadWorker.__init__)
    for state in (
        "self.worker_connections = ",
        "self.keepalived_conns = deque()",
        "self.nr_conns = 0",
        "self.poller = ",
    ):
        assert state in source, state
    assert "self.alive" in inspect.getsource(ThreadWorker)


def test_parser_unreader_buffer_and_100_continue_flag():
    assert _parameters(http.get_parser)[:3] == ["cfg", "source", "source_addr"]
    assert callable(Unreader.take_buffered) and callable(Unreader.unread)
    # The flag the front clears after answering 100 Continue itself.
    assert Message._expected_100_continue is False
    assert _parameters(gunicorn_sock.ssl_context) == ["conf"]


def test_jsonpatch_add_inserts_the_value_itself_without_copying():
    value = {"nested": ["x"]}
    operation = jsonpatch.AddOperation({"op": "add", "path": "/a"})
    document = operation._add({"b": 1}, value)
    assert document == {"b": 1, "a": value}
    assert document["a"] is value  # shared, as placement relies on (the check copies the pod)
    listed = jsonpatch.AddOperation({"op": "add", "path": "/-"})._add(["x"], "y")
    assert listed == ["x", "y"]
