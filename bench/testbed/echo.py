"""A latency-sensitive pod's records: echo_client.c (compiled by the
testbed) sends small UDP requests to an echo server (the testbed runs
inetd's built-in one) on a fixed schedule (a slow answer does not slow the
schedule, as with a service's callers) and appends one record per request
to its output file every half second: the send time (epoch seconds) and the
round-trip time in seconds, or ``LOST`` when no answer came within a second,
as two native doubles. sockperf would be the usual tool, but its client
spins a whole core to keep its rate (measured: 4.8 s of CPU in a 5 s run at
1,000 requests a second), and this machine has two; a Python client took
0.35-0.45 s of CPU in a 5 s run, the compiled one 0.2-0.25 s, most of it
the kernel's UDP path, which no client avoids.
"""

import array

LOST = -1.0


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


def round_trips(path: str, skip: float) -> list[tuple[float, float]]:
    """A latency client's records, its first ``skip`` seconds left out (ARP,
    the interpreter starting: sockperf's warm-up does the same)."""
    records = read_records(path)
    pairs = list(zip(records[0::2], records[1::2], strict=True))
    if not pairs:
        return []
    first = pairs[0][0]
    return [(at, rtt) for at, rtt in pairs if at >= first + skip]
