"""The testbed's class-blind optimum against every placement of a small run:
the least busy busiest link, then the quietest spread."""

import itertools

import numpy as np

from bench.scheduler_model import MAX_SKEW_HOSTNAME
from bench.testbed.optimum import TANGENTS, optimum_nodes
from bench.testbed.workload import Arrival, latency_bits

LINK = 50e6


def _loads(arrivals, background, nodes):
    loads = background.copy()
    for arrival, node in zip(arrivals, nodes, strict=True):
        loads[node] += arrival.bits_per_direction
    return loads / LINK


def test_the_optimum_is_the_best_of_every_placement():
    arrivals = [
        Arrival(0.0, "ingest", "bulk", 30e6),
        Arrival(1.0, "ingest", "bulk", 30e6),
        Arrival(2.0, "frontend", "latency", latency_bits()),
        Arrival(3.0, "frontend", "latency", latency_bits()),
        Arrival(4.0, "crashloop", "exits", 0.0),
    ]
    background = np.zeros((4, 2))
    background[1] = [LINK / 40, LINK]  # a hot node's upload
    chosen = optimum_nodes(arrivals, background, LINK)
    every = list(itertools.product(range(4), repeat=len(arrivals)))
    busiest = min(_loads(arrivals, background, p).max() for p in every)
    assert _loads(arrivals, background, chosen).max() <= busiest + 1e-6
    # Among those placements, the sum of squared shares within the tangents' gap.
    best = min(
        (_loads(arrivals, background, p) ** 2).sum()
        for p in every
        if _loads(arrivals, background, p).max() <= busiest + 1e-6
    )
    gap = (TANGENTS[1] / 2) ** 2 * background.size
    assert (_loads(arrivals, background, chosen) ** 2).sum() <= best + gap
    # So, blind to the kinds: nothing on the hot node, the bulk pods apart,
    # and the latency pods on the links the bulk pods leave quiet.
    assert 1 not in chosen and chosen[0] != chosen[1]
    assert {chosen[2], chosen[3]}.isdisjoint({chosen[0], chosen[1]})


def test_a_workload_keeps_the_hostname_spread():
    # Eight replicas of a small pod, three nodes of four taken by bulk pods:
    # the quietest spread would put four on each free node; the spread rule
    # (maxSkew 3 over every node, hot or not) allows three.
    arrivals = [Arrival(float(i), f"ingest-{i}", "bulk", 30e6) for i in range(2)]
    arrivals += [Arrival(10.0 + i, "frontend", "latency", latency_bits()) for i in range(8)]
    chosen = optimum_nodes(arrivals, np.zeros((4, 2)), LINK)
    per_node = [chosen[2:].count(node) for node in range(4)]
    assert max(per_node) - min(per_node) <= MAX_SKEW_HOSTNAME
    assert sum(per_node[node] for node in set(chosen[:2])) >= 2  # beside a bulk pod
