"""A service and its clients over TCP, for the peers testbed.

- ``server PORT RESPONSE_BYTES``: answers each request of ``REQUEST_BYTES``
  with ``RESPONSE_BYTES``, one thread per connection.
- ``client OUT RATE RESPONSE_BYTES ENDPOINT...``: one connection to each of
  the service's pods, requests sent round-robin over them at ``RATE`` a
  second (kube-proxy spreads connections over the endpoints evenly,
  whichever zone they are in), one at a time. It writes each request's
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
        self.endpoints = endpoints
        self.counts = {endpoint: [0, 0] for endpoint in endpoints}  # sent, received
        self.records = array.array("d")
        self.running = True

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
        connections = [self._connect(endpoint) for endpoint in self.endpoints]
        request = b"q" * REQUEST_BYTES
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        flushed = next_at
        turn = 0
        while self.running:
            endpoint = self.endpoints[turn % len(self.endpoints)]
            connection = connections[turn % len(self.endpoints)]
            turn += 1
            started = time.perf_counter()
            connection.sendall(request)
            if not _read_exactly(connection, self.response_bytes):
                break
            self.records.extend((time.time(), time.perf_counter() - started))
            counts = self.counts[endpoint]
            counts[0] += REQUEST_BYTES
            counts[1] += self.response_bytes
            next_at += interval
            now = time.monotonic()
            if now - flushed >= FLUSH_SECONDS:
                self._flush()
                flushed = now
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
