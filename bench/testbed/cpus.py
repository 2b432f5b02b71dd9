"""Which CPUs the testbed's processes run on.

Every emulated node shares this machine's cores, which no real node does:
without care, the other nodes' CPU work (iperf3, the exporters, Prometheus,
the webhook, this driver) delays the round-trip measurers' wake-ups by as
much as the links delay their packets, and by a different amount in every
run. So the measurers (the latency clients, the probe and the echo server)
get a CPU of their own, the last one this process may use, and run at a
higher priority on it; everything else the testbed starts runs on the
others. On a one-CPU machine only the priority is left.
"""

import contextlib
import os
from collections.abc import Iterator, Sequence

NICENESS = -10
# Read once, at import: inside off_the_measuring_cpu the calling thread's
# own set no longer holds the measurers' CPU.
_ALLOWED = sorted(os.sched_getaffinity(0))


def measuring_cpu() -> int | None:
    """The CPU kept for the measurers, or None where there is only one."""
    return _ALLOWED[-1] if len(_ALLOWED) > 1 else None


def measuring(argv: Sequence[str]) -> list[str]:
    """``argv`` as a measurer runs it: on its own CPU, at a higher priority."""
    cpu = measuring_cpu()
    pin = ["taskset", "--cpu-list", str(cpu)] if cpu is not None else []
    return [*pin, "nice", "-n", str(NICENESS), *argv]


@contextlib.contextmanager
def off_the_measuring_cpu() -> Iterator[None]:
    """The calling thread, and every thread and process it starts, on the
    CPUs other than the measurers' until the block ends (a thread's affinity
    is inherited by what it starts)."""
    before, cpu = os.sched_getaffinity(0), measuring_cpu()
    if cpu is None or cpu not in before:
        yield
        return
    os.sched_setaffinity(0, before - {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
