"""What a bulk pod does to a latency pod on the same quiet link, on this
machine: the floor any placement that puts the two together is held to.

    python -m bench.testbed.neighbour    # as root, about 30 s

One node of the testbed (bench/testbed/network.py, the default 50 Mbit/s
link), a latency pod on it for ``SECONDS``: alone, then beside a bulk pod
sending as bench.testbed's do (30 Mbit/s, 60% of the link, in the
direction its requests leave by). Prints each round trip's p50 and p99:
what a placement that puts the two on one link, the optimum's included,
holds that latency pod to. Prints only; everything it creates is removed
at the end.
"""

import sys
import tempfile
import time

from bench.testbed.cpus import off_the_measuring_cpu
from bench.testbed.echo import round_trips
from bench.testbed.network import Network
from bench.testbed.run import why_unavailable
from bench.testbed.settings import TestbedSettings
from bench.testbed.stats import percentiles
from bench.testbed.workload import Sinks, start_pod_process

SECONDS = 12.0
SETTLE = 2.0  # the bulk sender at its rate before the round trips count
SETTINGS = TestbedSettings()  # bench.testbed's link and bulk rate


def latency_figures(network: Network, sinks: Sinks, workdir: str, beside_bulk: bool) -> str:
    """One latency pod's p50 and p99 over SECONDS, alone or beside a bulk pod."""
    node = network.nodes[0]
    latency_pod = network.add_pod(node)
    bulk = None
    if beside_bulk:
        bulk_pod = network.add_pod(node)
        rate = SETTINGS.mix.bulk_bits
        bulk = start_pod_process("bulk", bulk_pod, rate, workdir, "bulk", sinks.take_port())
        time.sleep(SETTLE)
    latency = start_pod_process("latency", latency_pod, 0, workdir, f"latency-{beside_bulk}", None)
    time.sleep(SECONDS)
    latency.stop()
    if bulk is not None:
        bulk.stop()
    p50, p99 = percentiles(round_trips(latency.latency_path or "", skip=1.0), (0.5, 0.99))
    return f"p50 {p50 * 1e3:.2f} ms, p99 {p99 * 1e3:.2f} ms"


def main() -> int:
    why = why_unavailable()
    if why is not None:
        print(f"the testbed cannot run here: {why}")
        return 1
    with tempfile.TemporaryDirectory() as workdir:
        network = Network(["tb-node-1"], int(SETTINGS.link_bits))
        sinks = None
        try:
            with off_the_measuring_cpu():
                sinks = Sinks(workdir, 1)
            alone = latency_figures(network, sinks, workdir, beside_bulk=False)
            beside = latency_figures(network, sinks, workdir, beside_bulk=True)
        finally:
            if sinks is not None:
                sinks.stop()
            network.close()
    print(f"latency pod alone on its node:      {alone}")
    print(f"latency pod beside a bulk pod:      {beside}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
