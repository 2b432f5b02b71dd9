"""A service and its clients over TCP, for the peers testbed.

- ``server PORT RESPONSE_BYTES``: answers each request of ``REQUEST_BYTES``
  with ``RESPONSE_BYTES``, one thread per connection.
- ``client OUT RATE RESPONSE_BYTES ENDPOINT...``: one connection to each of
  the service's pods, requests sent round-robin over them at ``RATE`` a
  second (kube-proxy spreads connections over the endpoints evenly,
  whichever zone they are in), one at a time. ``@FILE`` instead of the
  endpoints names a file of them, one a line, which the client reads again
  when it changes or a connection breaks and then connects anew, as a
  client of a Service follows its endpoints through a rollout of the
  server (a request that breaks is not recorded). It writes each request's
  (wall time, round trip in seconds) to ``OUT.rtt`` and, twice a second,
  the bytes sent to and received from each endpoint to ``OUT.bytes.json``:
  what a mesh sidecar counts, and where the bytes went.
"""

import array
import json
import os
import signal
import socket
import socketserver
import sys
import time

REQUEST_BYTES = 200
FLUSH_SECONDS = 0.5
RECONNECT_SECONDS = 30.0


def _read_exactly(connection: socket.socket, size: int) -> bool:
    left = size
    while left:
        chunk = connection.recv(min(left, 65536))
        if not chunk:
            return False
        left -= len(chunk)
    return True


def serve(port: int, response_bytes: int) -> None:
    answer = b"r" * response_bytes

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while _read_exactly(self.request, REQUEST_BYTES):
                self.request.sendall(answer)

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    socketserver.ThreadingTCPServer.daemon_threads = True
    with socketserver.ThreadingTCPServer(("0.0.0.0", port), Handler) as server:
        server.serve_forever()


class Client:
    def __init__(self, out: str, rate: float, response_bytes: int, endpoints: list[str]) -> None:
        self.out, self.rate, self.response_bytes = out, rate, response_bytes
        self.source = endpoints[0][1:] if endpoints[:1] and endpoints[0][:1] == "@" else None
        self.endpoints = endpoints if self.source is None else []
        self.counts: dict[str, list[int]] = {}  # endpoint -> sent, received
        self.records = array.array("d")
        self.running = True
        self._read_at = 0.0  # the endpoint file's mtime when last read
        self.connections: list[socket.socket] = []

    def _reconnect(self) -> None:
        """Connect to each endpoint, reading the file again first when there
        is one (and again, for up to RECONNECT_SECONDS, while an endpoint
        in it does not answer: the file is about to change)."""
        for connection in self.connections:
            connection.close()
        self.connections = []
        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            if self.source is not None:
                self._read_at = os.stat(self.source).st_mtime
                with open(self.source) as handle:
                    self.endpoints = [line.strip() for line in handle if line.strip()]
            try:
                for endpoint in self.endpoints:
                    self.connections.append(self._connect(endpoint))
                break
            except OSError:
                for connection in self.connections:
                    connection.close()
                self.connections = []
                if self.source is None or time.monotonic() > deadline:
                    raise
        for endpoint in self.endpoints:
            self.counts.setdefault(endpoint, [0, 0])

    def _moved(self) -> bool:
        """The endpoint file changed since it was read."""
        return self.source is not None and os.stat(self.source).st_mtime != self._read_at

    def _connect(self, endpoint: str) -> socket.socket:
        host, _, port = endpoint.rpartition(":")
        for _ in range(50):  # the server's pod may still be starting
            try:
                connection = socket.create_connection((host, int(port)), timeout=5)
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return connection
            except OSError:
                time.sleep(0.1)
        raise OSError(f"cannot connect to {endpoint}")

    def _flush(self) -> None:
        with open(self.out + ".rtt", "ab") as handle:
            self.records.tofile(handle)
        self.records = array.array("d")
        temporary = self.out + ".bytes.json.tmp"
        with open(temporary, "w") as handle:
            json.dump(self.counts, handle)
        os.replace(temporary, self.out + ".bytes.json")

    def run(self) -> None:
        self._reconnect()
        request = b"q" * REQUEST_BYTES
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        flushed = next_at
        turn = 0
        while self.running:
            endpoint = self.endpoints[turn % len(self.endpoints)]
            connection = self.connections[turn % len(self.endpoints)]
            turn += 1
            started = time.perf_counter()
            try:
                connection.sendall(request)
                answered = _read_exactly(connection, self.response_bytes)
            except OSError:
                answered = False
            if not answered:
                if self.source is None:
                    break
                self._reconnect()  # the server pod went: its endpoints moved
                continue
            self.records.extend((time.time(), time.perf_counter() - started))
            counts = self.counts[endpoint]
            counts[0] += REQUEST_BYTES
            counts[1] += self.response_bytes
            next_at += interval
            now = time.monotonic()
            if now - flushed >= FLUSH_SECONDS:
                self._flush()
                flushed = now
                if self._moved():
                    self._reconnect()
            time.sleep(max(0.0, next_at - time.monotonic()))
        self._flush()


def read_rtts(path: str) -> list[tuple[float, float]]:
    """(wall time, round trip in seconds) of each request a client wrote."""
    values = array.array("d")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    values.frombytes(data[: len(data) // 16 * 16])
    return list(zip(values[0::2], values[1::2], strict=True))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["server"]:
        serve(int(args[1]), int(args[2]))
        return 0
    if args[:1] == ["client"]:
        client = Client(args[1], float(args[2]), int(args[3]), args[4:])

        def stop(*_: object) -> None:
            client.running = False

        signal.signal(signal.SIGTERM, stop)
        client.run()
        return 0
    print(
        "usage: conversation server PORT RESPONSE_BYTES | client OUT RATE RESPONSE_BYTES ENDPOINT..."
    )
    return 2


if __name__ == "__main__":
    sys.exit(main())
