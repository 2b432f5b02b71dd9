"""A latency-sensitive pod's traffic: small UDP requests to an echo server
(the testbed runs inetd's built-in one).

``python -m bench.testbed.echo client ADDRESS:PORT OUT`` sends
``--rate`` requests a second on a fixed schedule (not one at a time: a slow
answer does not slow the schedule, as with a service's callers) and appends
one record per request to OUT every half second: the send time (epoch
seconds) and the round-trip time in seconds, or ``LOST`` when no answer came
within a second. sockperf would be the usual tool, but its client spins a
whole core to keep its rate (measured: 4.8 s of CPU in a 5 s run at 1,000
requests a second), and this machine has two.
"""

import argparse
import array
import contextlib
import selectors
import signal
import socket
import struct
import sys
import time

LOST = -1.0
_HEADER = struct.Struct("!QQ")  # sequence number, send time (perf_counter_ns)
TIMEOUT = 1.0  # seconds after which a request counts as lost
FLUSH = 0.5  # seconds between appends to the output file


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


class _Client:
    def __init__(self, server: tuple[str, int], out: str, rate: float, size: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        self.sock.connect(server)
        self.out, self.interval, self.size = out, 1.0 / rate, max(size, _HEADER.size)
        self.sent: dict[int, tuple[float, int]] = {}  # seq -> (epoch, perf_counter_ns)
        self.records = array.array("d")
        self.stopping = False

    def run(self, duration: float) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ)
        start = time.perf_counter()
        next_send, seq, last_flush = start, 0, start
        padding = b"\0" * (self.size - _HEADER.size)
        while not self.stopping and time.perf_counter() - start < duration:
            now = time.perf_counter()
            if now >= next_send:
                self.sent[seq] = (time.time(), time.perf_counter_ns())
                # No route or a full buffer: the request is lost, and counted so.
                with contextlib.suppress(OSError):
                    self.sock.send(_HEADER.pack(seq, self.sent[seq][1]) + padding)
                seq += 1
                next_send += self.interval
                if next_send < now - TIMEOUT:  # asleep for long: do not send a burst
                    next_send = now
                continue
            for _ in selector.select(max(0.0, next_send - now)):
                self._receive()
            if now - last_flush >= FLUSH:
                self._expire(time.perf_counter_ns())
                self._flush()
                last_flush = now
        self._expire(time.perf_counter_ns() + int(TIMEOUT * 1e9))
        self._flush()

    def _receive(self) -> None:
        while True:
            try:
                data = self.sock.recv(2048)
            except (BlockingIOError, ConnectionRefusedError):
                return
            arrived = time.perf_counter_ns()
            seq, _ = _HEADER.unpack_from(data)
            sent = self.sent.pop(seq, None)
            if sent is not None:
                self.records.extend((sent[0], (arrived - sent[1]) / 1e9))

    def _expire(self, now_ns: int) -> None:
        limit = now_ns - int(TIMEOUT * 1e9)
        for seq in [s for s, (_, t) in self.sent.items() if t < limit]:
            self.records.extend((self.sent.pop(seq)[0], LOST))

    def _flush(self) -> None:
        with open(self.out, "ab") as handle:
            self.records.tofile(handle)
        self.records = array.array("d")


def read_records(path: str) -> array.array:  # type: ignore[type-arg]
    """(send time, round trip or LOST) pairs, flattened, as the client wrote them."""
    records = array.array("d")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return records
    records.frombytes(data[: len(data) // 16 * 16])
    return records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    sub = parser.add_subparsers(dest="mode", required=True)
    client = sub.add_parser("client")
    client.add_argument("address")
    client.add_argument("out")
    client.add_argument("--rate", type=float, default=1000.0)
    client.add_argument("--size", type=int, default=64)
    client.add_argument("--duration", type=float, default=3600.0)
    args = parser.parse_args(argv)
    runner = _Client(_address(args.address), args.out, args.rate, args.size)

    def stop(*_: object) -> None:
        runner.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runner.run(args.duration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
