"""The placement benchmark's summary of one scenario and strategy over seeds."""

import functools
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from bench.placement_scenarios import Scenario
from bench.placement_simulation import STEERED, Run, simulate
from bench.workload_spread import SpreadSummary

# Runs one scenario's seeds: map, or a process pool's imap.
SeedMapper = Callable[
    [Callable[[int], tuple[Run, np.ndarray]], Iterable[int]], Iterator[tuple[Run, np.ndarray]]
]


@dataclass(frozen=True)
class Summary:
    max_utilisation: float
    hot_share: float
    std_utilisation: float
    burst_max_share: float  # largest share of one burst on one node
    first_preference_share: float | None  # largest share of a burst's first preferences on one node
    pending_share: float  # pods left Pending: no node had room
    preferred_scored_share: float | None  # steered pods with a preferred node among those scored
    on_preferred_share: float | None  # steered pods bound to a preferred node
    on_first_share: float | None  # steered pods bound to their first preferred node
    label_writes_per_minute: float | None  # traffic-tier label changes (tiers only)
    first_burst_hot_share: float | None  # pods of a workload's first burst placed hot
    later_burst_hot_share: float | None  # pods of its later bursts placed hot
    watch_delay: float | None  # the steering replicas' measured watch delay, mean over bursts
    # Per seed, in the order run: the busiest link, and (pods placed hot, pods placed).
    seed_maxima: tuple[float, ...] = ()
    seed_hot: tuple[tuple[int, int], ...] = ()
    seed_spreads: tuple[SpreadSummary, ...] = ()  # per seed: its workloads' spread


def summarise(
    scenario: Scenario, strategy: str, seeds: Sequence[int], mapper: SeedMapper = map
) -> tuple[Summary, np.ndarray]:
    """``mapper``: runs the seeds (the builtin map, or a process pool's
    imap: each seed's run depends only on the seed)."""
    maxima, stds, spread, first_spread = [], [], [], []
    seed_spreads: list[SpreadSummary] = []
    seed_hot: list[tuple[int, int]] = []
    pending = steered = preferred_scored = on_preferred = on_first = 0
    label_writes = 0
    first_pods = first_hot = later_pods = later_hot = 0
    labelled_minutes = 0.0
    watch_delays: list[float] = []
    last = np.zeros(0)
    for run, utilisation in mapper(functools.partial(simulate, scenario, strategy), seeds):
        maxima.append(float(utilisation.max()))
        stds.append(float(utilisation.std()))
        seed_hot.append((run.hot, len(run.placements)))
        seed_spreads.append(SpreadSummary.of(run.spreads))
        pending += run.pending
        steered += run.steered
        preferred_scored += run.preferred_scored
        on_preferred += run.on_preferred
        on_first += run.on_first
        label_writes += run.label_writes
        first_pods += run.first_burst_pods
        first_hot += run.first_burst_hot
        later_pods += run.later_burst_pods
        later_hot += run.later_burst_hot
        labelled_minutes += run.labelled_minutes
        watch_delays += run.watch_delays
        spread.append(
            max(top / size for top, size in zip(run.burst_max, run.burst_sizes, strict=True))
        )
        first_spread.append(
            max(top / size for top, size in zip(run.burst_first_max, run.burst_sizes, strict=True))
        )
        last = utilisation
    firsts = statistics.mean(first_spread) if strategy in ("tutorial", *STEERED) else None
    hot, pods = (sum(column) for column in zip(*seed_hot, strict=True))
    summary = Summary(
        statistics.mean(maxima),
        hot / pods,
        statistics.mean(stds),
        statistics.mean(spread),
        firsts,
        pending / (pods + pending),
        preferred_scored / steered if steered else None,
        on_preferred / steered if steered else None,
        on_first / steered if steered else None,
        label_writes / labelled_minutes if strategy == "tiers" and labelled_minutes else None,
        first_hot / first_pods if first_pods else None,
        later_hot / later_pods if later_pods else None,
        statistics.mean(watch_delays) if watch_delays else None,
        tuple(maxima),
        tuple(seed_hot),
        tuple(seed_spreads),
    )
    return summary, last
