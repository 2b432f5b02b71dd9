"""What the learner's pod reads cost at 5,000 nodes and 150,000 pods
(15,000 Deployments of 10 pods), without and with each pod's node (a flow
source set, for steering by peers): every pod in one query, and a pass of
the slices the learner reads such a cluster in (learning/pod_slices.py),
through the product's PodTrafficSource against a real Prometheus scraping
the pods' series every 15 s. The forms take turns, pass by pass, so that
the machine's drift falls on each alike. Beside them, what sizes the
learner's first pass: its first slice (FIRST_SLICE), against counting every
pod (what sized it before). Prints only.

    python -m bench.pod_reads            # about 10 minutes
    python -m bench.pod_reads --passes 5
"""

import argparse
import statistics
import time
from collections.abc import Callable

from bench.learning import WHOLE_READ_TIMEOUT, every_pod_read, scraping
from bench.learning_load import Cluster, PodSeriesExporter
from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.learning.pod_slices import FINEST, FIRST_SLICE, WHOLE, PodSlice
from kubectl_nettraffic.learning.pod_traffic import PodTrafficSource
from kubectl_nettraffic.sources.prometheus import PrometheusSource

CLUSTER = Cluster(5000, 15_000)
FORMS = {"without nodes": False, "with nodes": True}


def _timed(source: PodTrafficSource, slices: list[PodSlice]) -> tuple[float, int, int]:
    """Seconds, samples and samples with a node of one read of ``slices``."""
    started = time.perf_counter()
    reports = [source.samples(pods) for pods in slices]
    seconds = time.perf_counter() - started
    samples = [s for report in reports for s in report.samples]
    return seconds, len(samples), sum(1 for s in samples if s.node)


def measure(passes: int) -> list[str]:
    pods = PodSeriesExporter(CLUSTER)
    prometheus = scraping({"pods": pods.target})
    try:
        settings = settings_from_mapping(
            {
                "prometheus": {"url": prometheus.url, "window": "1m", "timeout": "60s"},
                "metricsServer": {"enabled": False},
                "learning": {"timeout": WHOLE_READ_TIMEOUT},
            }
        )
        sources = {
            form: PodTrafficSource(
                PrometheusSource(settings.prometheus), settings.learning, with_nodes=nodes
            )
            for form, nodes in FORMS.items()
        }
        every_pod_read(sources["with nodes"], CLUSTER.pods, 900)
        reads: dict[tuple[str, str], list[tuple[float, int, int]]] = {}
        sizing: dict[str, list[float]] = {}
        without_nodes = sources["without nodes"]
        sizing_reads: dict[str, Callable[[], object]] = {
            "the pod count": without_nodes.pod_count,
            "the first slice": lambda: without_nodes.samples(FIRST_SLICE),
        }
        passes_of = {"whole": [WHOLE], "pass": [PodSlice(i, FINEST) for i in range(FINEST)]}
        for _ in range(passes):
            for form, source in sources.items():
                for kind, slices in passes_of.items():
                    reads.setdefault((form, kind), []).append(_timed(source, slices))
                print(form, [round(r[-1][0], 2) for r in reads.values()], flush=True)
            for what, read in sizing_reads.items():
                started = time.perf_counter()
                read()
                sizing.setdefault(what, []).append(time.perf_counter() - started)
    finally:
        prometheus.stop()
        pods.stop()
    rows = []
    for (form, kind), timings in reads.items():
        seconds = [t for t, _, _ in timings]
        _, samples, placed = timings[-1]
        what = "every pod in one query" if kind == "whole" else f"a pass of {FINEST} slices"
        rows.append(
            f"| {what}, {form} | {statistics.median(seconds):.2f} s "
            f"({', '.join(f'{t:.2f}' for t in seconds)}) | {samples:,} ({placed:,} with a node) |"
        )
    for kind in ("whole", "pass"):
        plain = statistics.median(t for t, _, _ in reads["without nodes", kind])
        nodes = statistics.median(t for t, _, _ in reads["with nodes", kind])
        rows.append(f"| {kind}: with nodes over without | {nodes / plain:.2f}x | - |")
    for what, seconds in sizing.items():
        rows.append(
            f"| sizing the first pass: {what} | {statistics.median(seconds):.2f} s "
            f"({', '.join(f'{t:.2f}' for t in seconds)}) | - |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=3, help="reads of each form (default 3)")
    args = parser.parse_args(argv)
    started = time.time()
    rows = measure(args.passes)
    print(
        f"\nat {CLUSTER.nodes:,} nodes, {CLUSTER.pods:,} pods: median of {args.passes} "
        "(each read)\n"
    )
    print("| read | query time | samples |\n|---|---|---|")
    print("\n".join(rows))
    print(f"\n{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
