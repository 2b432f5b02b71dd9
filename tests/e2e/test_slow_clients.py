"""Clients that misbehave, over raw sockets against the real gunicorn over
real TLS: admissions from a well-behaved client keep being answered, and
every stalled connection is closed within server.requestTimeout."""

import contextlib
import json
import socket
import ssl
import time

import pytest
import requests

from harness.fakeapi import node
from harness.reviews import pod, review
from harness.slow_clients import SlowClients, admission_request
from harness.webhook import WebhookProcess
from tests.conftest import wait_for
from tests.e2e.conftest import MIXED_RATES
from tests.e2e.conftest import node_file as _node_file
from tests.e2e.conftest import webhook_config as _config

REQUEST_TIMEOUT = 2.0
# The worker's loop looks for overdue connections at least once a second;
# the slow clients notice a close at their next probe (every 0.2 s here).
CLOSE_SLACK = 1.5


def _webhook(prometheus, directory, **server) -> WebhookProcess:
    path = _node_file(directory, "nodes.json", [node(n) for n in MIXED_RATES])
    config = _config(
        prometheus.url, path, server={"requestTimeout": f"{REQUEST_TIMEOUT:g}s", **server}
    )
    return WebhookProcess(config)


@pytest.fixture
def webhook(prometheus, tmp_path):
    process = _webhook(prometheus, tmp_path)
    yield process
    process.stop()


def _admission_seconds(webhook: WebhookProcess, count: int) -> list[float]:
    """Admissions, each on a new TLS connection, as a fresh API server would."""
    seconds = []
    for i in range(count):
        session = requests.Session()
        session.verify, session.trust_env = webhook.ca_file, False
        started = time.monotonic()
        answer = session.post(webhook.url + "/mutate", json=review(pod(f"p{i}-")), timeout=10)
        seconds.append(time.monotonic() - started)
        session.close()
        assert answer.status_code == 200 and answer.json()["response"]["allowed"]
    return seconds


def _closed(webhook: WebhookProcess, reason: str) -> float:
    metrics = webhook.session.get(webhook.url + "/metrics", timeout=5).text
    line = f'nettraffic_connections_closed_total{{reason="{reason}"}} '
    found = [row for row in metrics.splitlines() if row.startswith(line)]
    return float(found[0].split()[-1]) if found else 0.0


def test_slow_and_stalled_clients_hold_no_thread_and_are_closed_in_time(webhook):
    # 4 threads; 48 misbehaving connections, 12 of each kind: with gthread's
    # own reading, four trickling ones alone stopped every admission.
    clients = SlowClients(
        webhook.port,
        {"idle": 12, "handshake": 12, "headers": 12, "body": 12},
        interval=0.2,
        duration=30,
    )
    try:
        wait_for(lambda: clients.open_count() == 48, timeout=5)
        seconds = _admission_seconds(webhook, 20)
        assert max(seconds) < 1.0, seconds
        # Trickling at 5 bytes/s, none of them finishes its request in time.
        wait_for(lambda: clients.open_count() == 0, timeout=REQUEST_TIMEOUT + CLOSE_SLACK + 5)
        assert max(clients.close_times()) < REQUEST_TIMEOUT + CLOSE_SLACK
        assert min(clients.close_times()) >= REQUEST_TIMEOUT - 0.1
    finally:
        clients.stop()
    assert _closed(webhook, "timeout") == 48


def test_a_flood_of_unfinished_connections_evicts_the_oldest(prometheus, tmp_path):
    webhook = _webhook(prometheus, tmp_path, maxPendingConnections=8)
    clients = SlowClients(webhook.port, {"idle": 20}, interval=0.2, duration=20)
    try:
        wait_for(lambda: _closed(webhook, "evicted") == 12)  # the 12 oldest made room
        wait_for(lambda: clients.open_count() == 8)
        assert max(_admission_seconds(webhook, 5)) < 1.0
        # The first admission's connection evicted one more; the front then
        # held 7, so the later ones found room.
        wait_for(lambda: clients.open_count() == 7)
        assert _closed(webhook, "evicted") == 13
    finally:
        clients.stop()
        webhook.stop()


def _tls(webhook: WebhookProcess) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=webhook.ca_file)
    raw = socket.create_connection(("127.0.0.1", webhook.port), timeout=5)
    return context.wrap_socket(raw, server_hostname="localhost")


def _read_answers(sock: ssl.SSLSocket, count: int) -> list[tuple[int, bytes]]:
    """``count`` HTTP answers (status, body) read off a socket."""
    data, answers = b"", []
    while len(answers) < count:
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536) or b"\0EOF"
            assert not data.endswith(b"\0EOF"), data
        head, _, data = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(data) < length:
            data += sock.recv(65536)
        body, data = data[:length], data[length:]
        answers.append((status, body))
    return answers


def test_pipelined_requests_are_each_answered(webhook):
    first, second = review(pod()), review(pod())
    with _tls(webhook) as sock:
        sock.sendall(
            b"".join(b"".join(admission_request(json.dumps(r).encode())) for r in (first, second))
        )
        answers = _read_answers(sock, 2)
    uids = [json.loads(body)["response"]["uid"] for _, body in answers]
    assert [status for status, _ in answers] == [200, 200]
    assert uids == [first["request"]["uid"], second["request"]["uid"]]


def test_expect_continue_gets_100_before_the_body(webhook):
    body = json.dumps(review(pod())).encode()
    head = (
        f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Expect: 100-continue\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with _tls(webhook) as sock:
        sock.sendall(head)
        assert sock.recv(64).startswith(b"HTTP/1.1 100 Continue")
        sock.sendall(body)
        answers = _read_answers(sock, 1)
    assert answers[0][0] == 200


@pytest.mark.parametrize(
    ("head", "status", "says"),
    [
        (
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            411,
            "Content-Length",
        ),
        (
            b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 70_000 + b"\r\n\r\n",
            431,
            "header section",
        ),
        (
            b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
            413,
            "server.maxRequestBytes",
        ),
        (b"post /mutate HTTP/1.1\r\nHost: x\r\n\r\n", 400, "not METHOD TARGET HTTP/1.1"),
        (b"POST /mutate HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "no valid field name"),
    ],
)
def test_requests_the_front_will_not_buffer_get_a_json_answer(webhook, head, status, says):
    with _tls(webhook) as sock:
        sock.sendall(head)
        ((answer_status, body),) = _read_answers(sock, 1)
        assert sock.recv(1) == b""  # and the connection is closed
    assert answer_status == status
    assert says in json.loads(body)["error"]


def test_failed_handshakes_are_counted_and_clean_closes_are_not(webhook):
    with socket.create_connection(("127.0.0.1", webhook.port), timeout=5) as plain:
        plain.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # HTTP to the TLS port
        with contextlib.suppress(ConnectionResetError):
            while plain.recv(4096):
                pass  # until the server closes it
    with _tls(webhook) as sock, contextlib.suppress(ssl.SSLError, OSError):
        sock.unwrap()  # a TLS close_notify, and no request (the server just closes)
    for _ in range(3):  # kept-alive connections that their clients close
        session = requests.Session()
        session.verify, session.trust_env = webhook.ca_file, False
        session.get(webhook.url + "/healthz", timeout=5)
        session.close()
    wait_for(lambda: _closed(webhook, "tls-error") == 1)
    assert _closed(webhook, "timeout") == 0


def test_idle_kept_alive_connections_make_room_at_the_connection_limit(prometheus, tmp_path):
    # 20 connections at most; gthread keeps at most 20 - 4 threads = 16 alive.
    webhook = _webhook(prometheus, tmp_path, maxConnections=20, requestTimeout="10s")
    held: list[socket.socket] = []
    try:
        for _ in range(16):  # kept alive after one request each, then idle
            sock = _tls(webhook)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert _read_answers(sock, 1)[0][0] == 200
            held.append(sock)
        for _ in range(4):  # and four that never send: the limit is reached
            held.append(socket.create_connection(("127.0.0.1", webhook.port), timeout=5))
        # Once the front holds all 20, the next admission's connection makes
        # room by closing an idle one; without that it would wait for the
        # idle ones to time out (10 s).
        wait_for(
            lambda: (
                max(_admission_seconds(webhook, 1)) < 1.0 and _closed(webhook, "evicted-idle") >= 1
            )
        )
        assert max(_admission_seconds(webhook, 3)) < 1.0
    finally:
        for sock in held:
            sock.close()
        webhook.stop()
