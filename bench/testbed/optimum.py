"""The best class-blind placement of a testbed run's arrivals, from an exact
solver: every pod placed at once, knowing every pod's true bits/s each way
and the hot nodes' uploads, but not which pods are latency-sensitive.

It minimises the busiest link (the larger direction of each node's link,
as a share of its rate), then, among the placements that reach it, the sum
of every link direction's squared share: the spread that keeps links as
quiet as the busiest allows, the most any placement blind to the pods'
kinds can do for the latency pods. Under the rule the product keeps: a
workload's pods per node differ by at most the default hostname spread's
maxSkew (kubectl_nettraffic/scoring/spread.py; PodTopologySpread's
system defaults, bench/scheduler_model.py MAX_SKEW_HOSTNAME), so eight
replicas are not packed onto the two links the bulk pods leave quiet.
Every pod of a run fits on any node (cluster.py, NODE_CPU and
NODE_MEMORY), so nothing else binds. The squares
are tangent lines at every tenth of a link up to 150%, so the program stays
linear; below 150% the spread is exact to within the tangents' gap.
"""

import itertools
from collections.abc import Sequence

import numpy as np

from bench.mixed_program import Program
from bench.scheduler_model import MAX_SKEW_HOSTNAME
from bench.testbed.workload import Arrival

TANGENTS = np.arange(0.0, 1.51, 0.1)
SOLVER_SECONDS = 60.0
SLACK = 1e-6  # the busiest link's share, as proven, plus this


def optimum_nodes(
    arrivals: Sequence[Arrival], background: np.ndarray, link_bits: float
) -> list[int]:
    """The node of each arrival, in their order; ``background``: node x
    [receive, transmit] bits/s already on each link."""
    busiest = _solve(arrivals, background, link_bits, None)[1]
    return _solve(arrivals, background, link_bits, busiest + SLACK)[0]


def _solve(
    arrivals: Sequence[Arrival], background: np.ndarray, link_bits: float, cap: float | None
) -> tuple[list[int], float]:
    """Min the busiest link (``cap`` None), or min the squares with every
    link at most ``cap``; the nodes and the busiest link's share."""
    nodes = background.shape[0]
    program = Program()
    x = np.array(
        [[program.column(1.0) for _ in range(nodes)] for _ in arrivals], dtype=np.int64
    ).reshape(len(arrivals), nodes)
    busiest = program.column(10.0, cost=1.0 if cap is None else 0.0, integer=False)
    for pod in range(len(arrivals)):
        program.row({int(x[pod, n]): 1.0 for n in range(nodes)}, 1.0, 1.0)
    for workload in {arrival.workload for arrival in arrivals}:
        pods = [pod for pod, arrival in enumerate(arrivals) if arrival.workload == workload]
        if len(pods) <= MAX_SKEW_HOSTNAME:
            continue  # no placement of them breaks it
        for one, other in itertools.permutations(range(nodes), 2):
            skew = {int(x[pod, one]): 1.0 for pod in pods}
            skew.update({int(x[pod, other]): -1.0 for pod in pods})
            program.row(skew, -np.inf, MAX_SKEW_HOSTNAME)
    for node in range(nodes):
        for direction in range(2):
            share = {
                int(x[pod, node]): arrival.bits_per_direction[direction] / link_bits
                for pod, arrival in enumerate(arrivals)
                if arrival.bits_per_direction[direction] > 0
            }
            base = background[node, direction] / link_bits
            # base + sum(share) <= busiest (or cap)
            if cap is None:
                program.row({**share, busiest: -1.0}, -np.inf, -base)
            else:
                program.row(share, -np.inf, cap - base)
                square = program.column(100.0, cost=1.0, integer=False)
                for t in TANGENTS:  # square >= t**2 + 2 t (base + sum - t)
                    terms = {column: -2 * t * value for column, value in share.items()}
                    program.row({**terms, square: 1.0}, 2 * t * base - t * t, np.inf)
    values, _, _, optimal = program.solve(SOLVER_SECONDS)
    if not optimal:
        raise RuntimeError(f"the testbed's optimum was not proven in {SOLVER_SECONDS:g} s")
    chosen = [int(np.argmax(values[x[pod]])) for pod in range(len(arrivals))]
    loads = background.copy()
    for pod, node in enumerate(chosen):
        loads[node] += arrivals[pod].bits_per_direction
    return chosen, float(loads.max() / link_bits)
