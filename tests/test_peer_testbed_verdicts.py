"""The peer testbed's verdicts (bench/peer_testbed_verdicts.py) on
hand-made draws: each passes on figures that meet it and fails on the
draw that does not."""

import math

from bench.peer_testbed_figures import Figures
from bench.peer_testbed_report import report
from bench.peer_testbed_verdicts import noise, too_busy, verdicts


def _figures(
    policy: str,
    inter_node: float = 0.8,
    cross_zone: float = 0.6,
    pods: tuple[float, ...] = (1.6, 1.6, 0.3),
    probe: float = 0.2,
    zones: int = 3,
) -> Figures:
    return Figures(
        policy,
        max(pods),
        list(pods),
        cross_zone,
        inter_node,
        1e6,
        probe_p99_ms=probe,
        idle_probe_ms=0.1,
        zones={"client-1": (3, zones), "server-1": (2, 2)},
    )


def _draw(**ours: object) -> list[Figures]:
    """A draw whose default rolls out at 80% and 70% across nodes, 60% and
    50% across zones; nettraffic, its peers and the oracle as given."""
    return [
        _figures("default", 0.8, 0.6),
        _figures("default-again", 0.7, 0.5),
        _figures("nettraffic", **ours.get("nettraffic", {})),  # type: ignore[arg-type]
        _figures("nettraffic-peers", **ours.get("peers", {})),  # type: ignore[arg-type]
        _figures("oracle"),
    ]


def _verdict(runs: list[list[Figures]], starts: str) -> tuple[str, bool | None]:
    (found,) = [v for v in verdicts(runs) if v.goal.startswith(starts)]
    return found.figures, found.met


def test_the_noise_is_the_largest_gap_between_the_defaults_two_rollouts():
    wide = _draw()
    wide[1] = _figures("default-again", 0.5, 0.5)  # 30 points from the default's 80%
    draws = [{f.policy: f for f in figures} for figures in (_draw(), _draw(), wide)]
    assert math.isclose(noise(draws, lambda f: f.inter_node), 0.3)
    assert math.isnan(noise([], lambda f: f.inter_node))


def test_calm_nettraffic_passes_within_the_noise_and_fails_beyond_it():
    # Ceiling across nodes: the worse default (80%) plus the gap (10 points).
    within = [_draw(nettraffic={"inter_node": 0.9}), _draw()]
    text, met = _verdict(within, "nettraffic without a flow source: bytes across nodes")
    assert met is True and "1: 90% vs 90%" in text
    beyond = [_draw(), _draw(nettraffic={"inter_node": 0.95})]
    text, met = _verdict(beyond, "nettraffic without a flow source: bytes across nodes")
    assert met is False and "2: 95% vs 90%" in text


def test_peers_may_not_send_more_across_zones_than_the_default():
    assert _verdict(
        [_draw(peers={"cross_zone": 0.6})], "nettraffic-peers: bytes across zones never"
    )[1]
    assert not _verdict(
        [_draw(peers={"cross_zone": 0.61})], "nettraffic-peers: bytes across zones never"
    )[1]


def test_pods_near_their_server_are_counted_against_the_probe():
    # The default's pods: one of three within 2x of the probe's 0.2 ms.
    near = [_draw(peers={"pods": (0.3, 0.35, 0.4)})]
    assert _verdict(near, "nettraffic-peers: client pods")[1] is True
    far = [_draw(peers={"pods": (1.6, 1.6, 1.6)})]
    text, met = _verdict(far, "nettraffic-peers: client pods")
    assert met is False and "1: 3 vs 2" in text
    # Judged beyond the noise: where the default's second rollout had all
    # three near, a draw with none near is within the gap of two.
    noisy = _draw(peers={"pods": (1.6, 1.6, 1.6)})
    noisy[1] = _figures("default-again", 0.7, 0.5, pods=(0.3, 0.3, 0.3))
    text, met = _verdict([noisy], "nettraffic-peers: client pods")
    assert met is True and "1: 3 vs 4" in text
    # A busy draw is not judged on latency, and says why.
    busy = [_draw(peers={"pods": (1.6, 1.6, 1.6), "probe": 1.2})]
    assert too_busy({f.policy: f for f in busy[0]}) is not None
    assert _verdict(busy, "nettraffic-peers: client pods")[1] is None
    assert _verdict(busy, "draw 1: too busy")[1] is None


def test_workloads_missing_a_zone_are_judged_against_the_defaults_two_rollouts():
    goal = "nettraffic-peers: workloads of 3 pods or more missing a zone"
    assert _verdict([_draw()], goal)[1] is True
    text, met = _verdict([_draw(peers={"zones": 2})], goal)
    assert met is False and "1: 1 vs 0" in text
    # Where the default's own rollouts lose a zone by chance (one of them
    # here), one workload in two zones is within them.
    draw = _draw(peers={"zones": 2})
    draw[1] = _figures("default-again", 0.7, 0.5, zones=2)
    text, met = _verdict([draw], goal)
    assert met is True and "1: 1 vs 2" in text


def test_the_report_shows_the_probe_the_near_pods_and_the_verdicts():
    text = report([_draw()], 30)
    assert "| 1 | default | 1.60 | 1.60 | 1.60 | 0.20 | 1 of 3 | 80% | 60% | 3 |" in text
    assert "| nettraffic-peers: bytes across zones never above the default's" in text
    assert "idle testbed, draw by draw: 0.10 ms" in text


def test_the_median_pod_less_the_probe_is_judged_in_busy_draws_too():
    """The machine's load, as the probe felt it over the same seconds, is
    taken off: a pod 1 ms slower than the default's beside a probe 1 ms
    slower passes, even in a draw too busy for the plain latency verdicts;
    1 ms slower beside an unchanged probe fails."""
    goal = "nettraffic-peers: request p99 of the median client pod less the probe's"
    busy = [_draw(peers={"pods": (2.6, 2.6, 1.3), "probe": 1.2})]
    text, met = _verdict(busy, goal)
    assert met is True and "1: 1.40 ms vs 1.40 ms" in text
    slower = [_draw(peers={"pods": (2.6, 2.6, 1.3)})]
    text, met = _verdict(slower, goal)
    assert met is False and "1: 2.40 ms vs 1.40 ms" in text
