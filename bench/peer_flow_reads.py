"""The flow reads of bench.peer_learning, timed: the learner's read of the
pairs (every pair whole where they are within the cap's bound, else cut in
Prometheus) and the cut it falls back to, beside the same pairs read whole
and cut here, at the chart's cap and at one that cuts; with the pairs'
recording rule, from the recorded pairs too."""

import functools
import statistics
import time
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from kubectl_nettraffic.config import Settings, settings_from_mapping
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.peer_traffic import (
    PAIRS_RULE,
    PeerReport,
    answer_bound,
    pair_rates,
    pairs_in,
    read_peers,
)
from kubectl_nettraffic.sources.prometheus import PrometheusSource

TIGHT_CAP = 1  # under the two a workload calls (each is called by two on average)
FLOW_REPEATS = 5  # rounds of the flow reads, taking turns
T = TypeVar("T")


def flow_settings(
    prometheus_url: str, cap: int = 8, recorded: bool = False, each_way: bool = False
) -> Settings:
    """The learner's settings here: Istio's pairs over a 1m window."""
    return settings_from_mapping(
        {
            "prometheus": {"url": prometheus_url, "window": "1m", "timeout": "60s"},
            "peers": {
                "source": "istio",
                "maxPerWorkload": cap,
                "recordingRule": {"enabled": recorded},
                "bytesEachWay": each_way,
            },
        }
    )


class Read(NamedTuple):
    """One of the learner's reads, timed (median of FLOW_REPEATS), with the pairs
    read whole as of the same moment that it is compared with."""

    name: str  # in its row
    goal: str | None  # in its goal's row; None: no goal (the read past the bound)
    seconds: float
    report: PeerReport
    whole: PeerReport


class Reads(NamedTuple):
    """One cap's reads: the pairs read whole and cut here, and the learner's
    reads (as it reads, and cut in Prometheus, as past the bound), from the
    recording rule too where one is loaded."""

    whole_seconds: float
    bound: int  # the most series the learner's read lets through (answer_bound)
    # The run-to-run noise: how far a second whole read in the same round
    # was off the first, as a share of it, at the median round (the worst
    # round is one outlier, which would excuse any read).
    noise: float
    whole: PeerReport
    learner: list[Read]


def taking_turns(calls: dict[str, Callable[[], T]]) -> dict[str, tuple[list[float], T]]:
    """Each call's FLOW_REPEATS times and its last result, the calls taking
    turns (the order reversed every other round), so that none always runs first."""
    times: dict[str, list[float]] = {label: [] for label in calls}
    results: dict[str, T] = {}
    for round_number in range(FLOW_REPEATS):
        for label in calls if round_number % 2 == 0 else reversed(calls):
            started = time.perf_counter()
            results[label] = calls[label]()
            times[label].append(time.perf_counter() - started)
    return {label: (times[label], results[label]) for label in calls}


def _reads(
    prometheus_url: str, known: set[Workload], cap: int, at: float, rule: bool, each_way: bool
) -> Reads:
    settings = flow_settings(prometheus_url, cap, each_way=each_way)
    source = PrometheusSource(settings.prometheus)
    peers, window = settings.peers, settings.prometheus.window
    whole = pair_rates(peers, window)
    assert whole is not None
    calls: dict[str, Callable[[], PeerReport | None]] = {
        "whole": lambda: pairs_in(source.query_vector(whole, at=at), known, peers)
    }
    calls["whole, again"] = calls["whole"]
    compared, goals = {}, {}
    for recorded in (False, True) if rule else (False,):
        on = flow_settings(prometheus_url, cap, recorded=recorded, each_way=each_way).peers
        then = None
        if recorded:
            # Its samples are up to a minute old: compared with every pair
            # read whole as of the rule's last evaluation.
            answer = source.query_vector(f"timestamp({PAIRS_RULE})", at=at)
            evaluated = max(float(series["value"][1]) for series in answer)
            then = pairs_in(source.query_vector(whole, at=evaluated), known, peers)
        where = " from the recording rule (peers.recordingRule)" if recorded else ""
        goal = "the learner's read" + (" from the recording rule" if recorded else "")
        read = functools.partial(read_peers, source, on, window, known, at)
        for name, whole_first in (
            (f"the learner's read{where}", True),
            (f"cut in Prometheus{where}", False),
        ):
            calls[name] = functools.partial(read, whole_first=whole_first)
            compared[name], goals[name] = then, goal if whole_first else None
    timed = taking_turns(calls)
    whole_times, whole_report = timed.pop("whole")
    again, _ = timed.pop("whole, again")
    noise = statistics.median(
        abs(second / first - 1) for first, second in zip(whole_times, again, strict=True)
    )
    assert whole_report is not None
    learner = []
    for name, (times, report) in timed.items():
        assert report is not None and not report.rule_missing
        against = compared[name]
        if against is None:
            against = whole_report
        learner.append(Read(name, goals[name], statistics.median(times), report, against))
    bound = answer_bound(peers, len(known))
    return Reads(statistics.median(whole_times), bound, noise, whole_report, learner)


def _yes(met: bool) -> str:
    return "yes" if met else "**no**"


def _pair_rates(report: PeerReport) -> dict[frozenset[Workload], float]:
    return {
        frozenset((w, peer)): rate for w, listed in report.peers.items() for peer, rate in listed
    }


def _differing_pairs(whole: PeerReport, cut: PeerReport) -> list[tuple[Workload, Workload]]:
    """The pairs one read keeps and the other not, or weighs 0.1% apart."""
    first, second = _pair_rates(whole), _pair_rates(cut)
    differ = []
    for pair in first.keys() | second.keys():
        one, other = first.get(pair, 0.0), second.get(pair, 0.0)
        if abs(one - other) > 1e-3 * max(one, other):
            a, b = sorted(pair)
            differ.append((a, b))
    return differ


def _read_row(
    read: Read, reads: Reads, differ: list[tuple[Workload, Workload]], cap: int, bound: int
) -> str:
    report = read.report
    kept = sum(len(listed) for listed in report.peers.values()) // 2
    most = max((len(listed) for listed in report.peers.values()), default=0)
    both_ways = sum(1 for one, other in differ if {(one, other), (other, one)} <= reads.whole.calls)
    return (
        f"| ... at peers.maxPerWorkload {cap}: read whole and cut here / {read.name}, median of "
        f"{FLOW_REPEATS}, taking turns | {reads.whole_seconds:.2f} s / {read.seconds:.2f} s "
        f"({read.seconds / reads.whole_seconds:.2f}x); series in the answer "
        f"{reads.whole.series:,} / {report.series:,} (bound {bound:,}); "
        f"{kept:,} pairs kept, at most {most} a workload; "
        f"pairs kept or weighed otherwise than whole: {len(differ)} ({both_ways} called both ways); "
        f"cut in Prometheus: {'yes' if report.cut_in_prometheus else 'no'} |"
    )


def flow_reads(
    prometheus_url: str, known: set[Workload], rule: bool = False, each_way: bool = False
) -> list[str]:
    """The flow query's rows: the learner's read (every pair whole where
    they are within the cap's bound, else cut in Prometheus to each end's
    busiest) and the cut it falls back to, beside the same pairs read whole
    and cut here; with ``rule`` (the pairs' recording rule loaded), the
    same from the recorded pairs; at the chart's cap and at one that cuts."""
    at = time.time()
    rows = []
    for cap in (8, TIGHT_CAP):
        reads = _reads(prometheus_url, known, cap, at, rule, each_way)
        bound = reads.bound
        goals = []
        for read in reads.learner:
            differ = _differing_pairs(read.whole, read.report)
            rows.append(_read_row(read, reads, differ, cap, bound))
            if read.goal is None:
                continue
            within = read.report.series <= bound
            faster = read.seconds <= reads.whole_seconds * (1 + reads.noise)
            goals.append(
                f"| goal, {read.goal} at peers.maxPerWorkload {cap}: the answer within the "
                f"cap's bound (at most {bound:,} "
                f"series); the same pairs and bytes kept as cut whole; the read no slower than "
                f"whole beyond the noise (how far a second whole read was off the first in a "
                f"round, median of rounds, {reads.noise:.0%}) | "
                f"{_yes(within)}; {_yes(not differ)}; {_yes(faster)} |"
            )
        rows.extend(goals)
    return rows
