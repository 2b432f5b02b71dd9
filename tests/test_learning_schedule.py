"""When the learner reads Prometheus: hand-computed cases, and the learner
itself reading a synthetic cluster a slice at a time."""

from collections import Counter

import pytest

from kubectl_nettraffic.config import settings_from_mapping
from kubectl_nettraffic.errors import SourceError
from kubectl_nettraffic.kube.service_routing import ServiceRouting
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.learner import BandwidthLearning
from kubectl_nettraffic.learning.peer_traffic import PeerReport
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.pod_slices import WHOLE, PodSlice
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.schedule import PEERS, SLICE, YOUNG, LearningSchedule


def test_a_round_starts_once_the_last_minute_leaves_room_for_it():
    # 5% of a core: 3 s of query time in any minute.
    schedule = LearningSchedule(interval=15.0, share=0.05)
    assert schedule.next_round(sliced=False) == (SLICE, 0.0)
    schedule.finished(SLICE, started=0.0, seconds=2.0)
    # Due at 15, but 2 s spent and 2 s expected is 4 > 3: once [0, 2] has
    # left the minute, at 62.
    assert schedule.next_round(sliced=False) == (SLICE, 62.0)
    schedule.finished(SLICE, started=62.0, seconds=0.5)
    # 0.5 s spent, 0.5 s expected: on time.
    assert schedule.next_round(sliced=False) == (SLICE, 77.0)


def test_a_round_longer_than_the_budget_runs_alone_and_keeps_it_on_average():
    schedule = LearningSchedule(interval=15.0, share=0.05)
    schedule.finished(SLICE, started=0.0, seconds=2.5)
    schedule.finished(SLICE, started=62.5, seconds=5.0)
    # 5 s against 3 s a minute: alone (after 127.5, when it has left the
    # minute) and 60 x 5 / 3 = 100 s after it started, at 162.5 ...
    assert schedule.next_round(sliced=False) == (SLICE, 162.5)
    # ... however long the rounds of the other kind keep the window empty.
    schedule.finished(YOUNG, started=150.0, seconds=0.1)
    assert schedule.next_round(sliced=False, now=150.1) == (SLICE, 162.5)
    schedule.finished(SLICE, started=162.5, seconds=4.0)
    assert schedule.next_round(sliced=False) == (SLICE, 242.5)  # 60 x 4 / 3 = 80 s on


def test_young_rounds_keep_their_interval_while_slices_wait_for_room():
    schedule = LearningSchedule(interval=15.0, share=0.05)
    assert schedule.next_round(sliced=True) == (YOUNG, 0.0)  # young first on a tie
    schedule.finished(YOUNG, started=0.0, seconds=0.2)
    # Slices may use 3 - 4 young rounds x 0.2 = 2.2 s of a minute.
    assert schedule.slice_budget(sliced=True) == pytest.approx(2.2)
    assert schedule.next_round(sliced=True) == (SLICE, 0.0)
    schedule.finished(SLICE, started=0.2, seconds=2.0)
    # The next slice (2 s spent + 2 s expected > 2.2) waits for [0.2, 2.2]
    # to leave the minute, at 62.2; the young rounds go on meanwhile, the
    # minute's total staying within 3 s: 0.2 + 2.0 + 0.2 x 4 = 3.0 at 60.
    for due in (15.0, 30.0, 45.0, 60.0):
        assert schedule.next_round(sliced=True) == (YOUNG, due)
        schedule.finished(YOUNG, started=due, seconds=0.2)
    assert schedule.next_round(sliced=True) == (SLICE, 62.2)


def test_slices_budget_what_alternating_young_rounds_take_on_average():
    # Young rounds look for new controllers every other round: 0.4 s, then
    # next to nothing. The slices' part is what the young rounds take on
    # average, whichever came last.
    schedule = LearningSchedule(interval=15.0, share=0.05)
    for index, seconds in enumerate((0.4, 0.0, 0.4, 0.0)):
        schedule.finished(YOUNG, started=15.0 * index, seconds=seconds)
        if index % 2:  # a cheap one came last
            assert schedule.slice_budget(sliced=True) == pytest.approx(3 - 4 * 0.2)


def test_an_hour_of_slices_over_their_part_and_alternating_young_rounds_keeps_the_budget():
    # The learner's loop (it looks again on waking, an interval at most)
    # over an hour: every slice bigger than its part, young rounds of 0.4 s
    # and 0.01 s by turns. Pacing each slice by the last young round alone
    # ran slices just after a cheap one, at the whole budget's pace. The
    # hour may hold one slice more than its part: the last, whose wait
    # runs past the hour.
    schedule = LearningSchedule(interval=15.0, share=0.05)
    now, spent, young = 0.0, 0.0, 0
    while now < 3600.0:
        kind, at = schedule.next_round(sliced=True, now=now)
        if at > now:
            now = min(at, now + 15.0)
            continue
        seconds = 2.6 if kind == SLICE else (0.4, 0.01)[young % 2]
        young += kind == YOUNG
        schedule.finished(kind, started=now, seconds=seconds)
        spent, now = spent + seconds, now + seconds
    assert spent <= 60 * schedule.budget + 2.6


def test_young_rounds_held_back_by_their_half_leave_the_rest_to_the_slices():
    # One replica's part of the chart's default share: 0.75 s a minute. Young
    # rounds of 0.11 s on average (a look and a read by turns), held back by
    # their half (0.375 s), started 26 s apart rather than every 15 s.
    # Counted at one an interval (4 x 0.11 s, over half) the slices would
    # have half; at the pace they ran (3 a minute at most), the rest.
    schedule = LearningSchedule(interval=15.0, share=0.0125)
    for index in range(8):
        schedule.finished(YOUNG, started=26.0 * index, seconds=(0.2, 0.02)[index % 2])
    assert schedule.slice_budget(sliced=True) == pytest.approx(0.75 - 3 * 0.11)


def test_an_hour_at_150_000_pods_reads_a_pass_and_its_pairs_within_the_budget():
    # The learner's loop with the rounds' times of bench.peer_learning's run
    # on 0df03d3: 28 slices of 0.8 s, young rounds of 0.2 s and 0.025 s by
    # turns, the pairs' read 5.1 s, at 0.75 s a minute. Counted at one an
    # interval, the young rounds left the slices half the budget and the
    # hour ended before the pairs (25 of 28 slices live).
    schedule = LearningSchedule(interval=15.0, share=0.0125)
    now, spent, young, slices, pairs_at = 0.0, 0.0, 0, 0, None
    while now < 3600.0:
        kind, at = schedule.next_round(sliced=True, now=now, peers_due=slices == 28)
        if at > now:
            now = min(at, now + 15.0)
            continue
        seconds = {SLICE: 0.8, PEERS: 5.1}.get(kind) or (0.2, 0.025)[young % 2]
        young += kind == YOUNG
        slices += kind == SLICE
        if kind == PEERS:
            slices, pairs_at = 0, pairs_at or now
        schedule.finished(kind, started=now, seconds=seconds)
        spent, now = spent + seconds, now + seconds
    assert pairs_at is not None and pairs_at < 3000.0
    assert spent <= 60 * schedule.budget + 5.1


def test_a_slice_never_holds_up_a_young_round():
    schedule = LearningSchedule(interval=15.0, share=0.05)
    schedule.finished(YOUNG, started=0.0, seconds=0.5)
    schedule.finished(SLICE, started=1.0, seconds=2.4)  # slower than its room
    # Young rounds count only their own against half the budget (1.5 s):
    # 0.5 spent and 0.5 expected fit, so the one due at 15 is on time.
    assert schedule.next_round(sliced=True, now=3.4) == (YOUNG, 15.0)


def test_a_flow_read_bigger_than_the_slices_part_runs_alone_and_the_slices_wait_it_out():
    schedule = LearningSchedule(interval=15.0, share=0.025)  # 1.5 s a minute
    schedule.finished(PEERS, started=-1000.0, seconds=3.0)  # the last pass's read
    schedule.finished(SLICE, started=0.0, seconds=0.5)
    # 3 s expected, over the part alone: once the slice has left the minute.
    assert schedule.next_round(sliced=False, now=0.5, peers_due=True) == (PEERS, 60.5)
    schedule.finished(PEERS, started=60.5, seconds=3.0)
    # The next slice, of the same part, waits 60 x 3 / 1.5 = 120 s after the
    # read started, though 0.5 s would fit once the read left the minute.
    assert schedule.next_round(sliced=False, now=63.5) == (SLICE, 180.5)


class SyntheticCluster:
    """A reader answering from a list of pods (name, workload, bytes/s,
    created), on a clock the test moves; each query takes ``seconds``."""

    def __init__(self, pods, clock, seconds_per_pod):
        self.pods = pods
        self.clock = clock
        self.seconds_per_pod = seconds_per_pod
        self.read: list[str] = []
        self.counted = 0
        self.slices_at: list[float] = []  # each slice's evaluation time

    def _report(self, chosen):
        self.clock[0] += self.seconds_per_pod * len(chosen)  # the query's time
        self.read.extend(name for name, *_ in chosen)
        samples = tuple(
            PodSample(
                "ns", name, rate, 0.0, Workload("ns", "Deployment", workload), None, f"n{len(name)}"
            )
            for name, workload, rate, _ in chosen
        )
        return PodTrafficReport(samples, (), 0, self.clock[0])

    def pod_count(self):
        self.counted += 1
        return len(self.pods)

    def samples(self, pods: PodSlice = WHOLE):
        report = self._report([p for p in self.pods if pods.holds(p[0])])
        self.slices_at.append(report.evaluated_at)
        return report

    def young_samples(self):
        return self._report([p for p in self.pods if self.clock[0] - p[3] < 300])


def _deployments(count):
    """``count`` pods of Deployments of 10, named as the ReplicaSet
    controller names them, sending 1 MB/s, created long ago."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return [
        (f"app-{i // 10}-{alphabet[i % 27]}{alphabet[(i // 27) % 27]}", f"app-{i // 10}", 1e6, -1e6)
        for i in range(count)
    ]


def _learning(cluster, clock):
    settings = settings_from_mapping({"prometheus": {"url": "http://unused"}})
    return BandwidthLearning(settings, cluster, clock=lambda: clock[0])


def test_a_large_cluster_is_read_a_slice_at_a_time_each_pod_once_a_pass():
    clock = [0.0]
    pods = _deployments(12_000)
    cluster = SyntheticCluster(pods, clock, seconds_per_pod=1e-5)  # 100,000 pods/s
    learning = _learning(cluster, clock)
    # The first round reads the first of the finest slices: its 459 pods say
    # about 12,400 in all, at 5,000 a slice 3, and the pass starts over in them.
    assert learning.update() == SLICE
    assert sorted(cluster.read) == sorted(name for name, *_ in pods if name.endswith("b"))
    assert learning.slices == 3 and learning.latest() is None
    cluster.read.clear()
    kinds = []
    while len([k for k in kinds if k == SLICE]) < 3:
        _, at = learning.schedule.next_round(learning.slices > 1)
        clock[0] = max(clock[0], at)
        kinds.append(learning.update())
    # The pass read 100,000 pods/s; the young rounds read nothing, so slices
    # may use the whole 1.5 s of a minute (learning.prometheusShare 0.025),
    # and a slice is sized to half of it: 75,000 pods, so the next pass reads
    # the whole cluster at once.
    assert learning.pods_per_slice == pytest.approx(75_000)
    assert sorted(cluster.read) == sorted(name for name, *_ in pods)  # each pod once
    assert YOUNG in kinds  # between the slices (no pod is young here: nothing read)
    assert len(learning.latest().workloads) == 1200
    # The next pass is sized from the pods this one read; nothing counted them.
    assert cluster.counted == 0
    while True:
        _, at = learning.schedule.next_round(learning.slices > 1)
        clock[0] = max(clock[0], at)
        if learning.update() == SLICE:
            break
    assert cluster.counted == 0 and learning.slices == 1


def test_a_large_clusters_first_slice_is_learned_and_its_pass_goes_on_uncounted():
    clock = [0.0]
    pods = _deployments(150_000)
    cluster = SyntheticCluster(pods, clock, seconds_per_pod=2.5e-5)  # 40,000 pods/s
    learning = _learning(cluster, clock)
    # The first round: the first of the finest slices, 5,556 pods, about
    # 150,000 in all, past 13 slices of 5,000: the pass goes on in the 28.
    assert learning.update() == SLICE
    assert (learning.slices, learning.next_slice, cluster.counted) == (28, 1, 0)
    first = {name for name, *_ in pods if name.endswith("b")}
    assert set(cluster.read) == first
    # Learned from it at once: its pods' workloads only.
    learned = {workload.name for workload in learning.latest().workloads}
    assert learned and learned <= {workload for name, workload, *_ in pods if name in first}
    # Its pass reads every other pod once, and no count ever.
    while learning.passes == 0:
        _step(learning, clock)
    assert sorted(cluster.read) == sorted(name for name, *_ in pods)
    assert cluster.counted == 0


def test_a_first_slice_without_a_pod_counts_them():
    clock = [0.0]
    # A StatefulSet's pods: ordinals, none in the first slice ("b").
    pods = [(f"db-{i}", "db", 1e6, -1e6) for i in range(4)]
    cluster = SyntheticCluster(pods, clock, seconds_per_pod=1e-4)
    learning = _learning(cluster, clock)
    assert learning.update() == SLICE
    assert (cluster.counted, learning.slices, learning.latest()) == (1, 1, None)
    assert learning.update() == SLICE  # the pass, whole
    assert sorted(cluster.read) == sorted(name for name, *_ in pods)
    assert learning.latest().workloads.keys() == {Workload("ns", "Deployment", "db")}


def test_the_published_figures_count_each_round_its_query_time_and_the_pass():
    clock = [0.0]
    cluster = SyntheticCluster(_deployments(12_000), clock, seconds_per_pod=1e-4)
    learning = _learning(cluster, clock)
    rounds: Counter[str] = Counter()
    seconds: Counter[str] = Counter()
    while learning.passes == 0:
        _, at = learning.schedule.next_round(learning.slices > 1)
        clock[0] = max(clock[0], at)
        before = clock[0]
        kind = learning.update()
        rounds[kind] += 1
        seconds[kind] += clock[0] - before
        if learning.latest() is not None:
            progress = learning.latest().progress
            assert progress.rounds == rounds
            assert progress.query_seconds == pytest.approx(dict(seconds))
            assert (progress.slices, progress.slices_read) == (
                learning.slices,
                learning.next_slice,
            )
    # The first of the finest slices (459 pods), then 3 slices of 5,000 pods
    # at most (1.2 s for 12,000 pods); young rounds between them read
    # nothing. The next pass in 2 slices: 10,000 pods a second, half of the
    # 1.5 s slices may use.
    progress = learning.latest().progress
    assert progress.rounds[SLICE] == 4
    assert progress.query_seconds[SLICE] == pytest.approx((459 + 12_000) * 1e-4)
    assert (progress.passes, progress.slices, progress.slices_read) == (1, 2, 0)

    def fails():
        clock[0] += 0.5
        raise SourceError("Prometheus did not answer", "timeout")

    cluster.young_samples = fails
    learned = learning.latest().workloads
    while learning.update() != YOUNG:
        pass
    # A failed round learns nothing, but its query time counts.
    progress = learning.latest().progress
    assert learning.latest().workloads == learned
    assert progress.rounds[YOUNG] == rounds[YOUNG] + 1
    assert progress.query_seconds[YOUNG] == pytest.approx(seconds[YOUNG] + 0.5)


def test_a_new_workload_is_learned_from_a_young_round_before_its_slice_comes():
    clock = [0.0]
    old = _deployments(20_000)
    cluster = SyntheticCluster(old, clock, seconds_per_pod=1e-4)  # 10,000 pods/s
    learning = _learning(cluster, clock)
    learning.update()  # the first of the finest slices: 741 pods, about 20,000 in all
    assert learning.slices == 5 and learning.next_slice == 0
    while learning.next_slice == 0:  # the first slice of five (young rounds between)
        _, at = learning.schedule.next_round(learning.slices > 1)
        clock[0] = max(clock[0], at)
        learning.update()
    cluster.pods = old + [(f"new-{i}-x", "new", 50e6, clock[0]) for i in range(3)]
    new = Workload("ns", "Deployment", "new")
    while new not in (learning.latest().workloads if learning.latest() else {}):
        _, at = learning.schedule.next_round(learning.slices > 1)
        clock[0] = max(clock[0], at)
        assert learning.update() == YOUNG  # learned before another slice
    assert learning.next_slice == 1
    assert learning.latest().workloads[new] >= 50e6


def test_a_round_is_placed_from_now_not_from_when_it_fell_due():
    schedule = LearningSchedule(interval=15.0, share=0.05)
    schedule.finished(SLICE, started=0.0, seconds=1.0)
    schedule.finished(SLICE, started=15.0, seconds=1.0)
    # Due at 30 and fitting then (2 s spent, 1 s expected), but asked at 40
    # after the thread was held up: at 40, not at 30.
    assert schedule.next_round(sliced=False, now=40.0) == (SLICE, 40.0)


def test_slices_and_young_rounds_each_keep_half_the_budget_in_a_wave_of_new_workloads():
    schedule = LearningSchedule(interval=15.0, share=0.05)
    schedule.finished(YOUNG, started=0.0, seconds=0.9)  # a wave of new workloads
    # 4 young rounds x 0.9 s would leave nothing of 3 s: slices keep 1.5 s.
    assert schedule.slice_budget(sliced=True) == pytest.approx(1.5)
    assert schedule.next_round(sliced=True, now=1.0) == (SLICE, 1.0)
    schedule.finished(SLICE, started=1.0, seconds=1.2)
    # The young round due at 15 would make 1.8 s of young rounds, over their
    # half: once the first has left the minute, at 60.9 (the next slice,
    # 1.2 + 1.2 over 1.5, waits for the first slice to leave, at 62.2).
    assert schedule.next_round(sliced=True, now=2.2) == (YOUNG, pytest.approx(60.9))


class PairsReader:
    """The flow query's answer: every workload talks to the next one; each
    read takes ``seconds`` on the test's clock and is recorded."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds
        self.reads: list[tuple[set, float]] = []

    def read(self, known, at, waypoints):
        known = set(known)
        self.reads.append((known, at))
        self.waypoints = waypoints
        self.clock[0] += self.seconds
        report = PeerReport()
        for workload in sorted(known):
            number = int(workload.name.split("-")[1])
            peer = Workload("ns", "Deployment", f"app-{number + 1}")
            if peer in known:
                report.peers.setdefault(workload, []).append((peer, 1e6))
                report.peers.setdefault(peer, []).append((workload, 1e6))
        return report


def _step(learning, clock):
    """The learner's next round, when its schedule says (the thread's loop)."""
    _, at = learning.next_round()
    clock[0] = max(clock[0], at)
    return learning.update(), at


def test_with_a_flow_source_the_pairs_are_read_once_a_pass_after_its_last_slice():
    clock = [0.0]
    pods = _deployments(12_000)
    cluster = SyntheticCluster(pods, clock, seconds_per_pod=1e-5)
    pairs = PairsReader(clock, seconds=0.5)
    settings = settings_from_mapping({"prometheus": {"url": "http://unused"}})
    waypoint = ServiceRouting(waypoints=frozenset({("ns", "waypoint")}))
    learning = BandwidthLearning(
        settings, cluster, clock=lambda: clock[0], peers=pairs, services=lambda: waypoint
    )
    kinds = []
    # A round counting the pods, then the first pass: 3 slices of 5,000,
    # then the pairs in a round of their own.
    while PEERS not in kinds:
        kinds.append(_step(learning, clock)[0])
    assert [k for k in kinds if k != YOUNG] == [SLICE] * 4 + [PEERS]
    # One read, after the last slice, as of it: every workload known by then.
    ((known, at),) = pairs.reads
    assert len(known) == 1200 and at == cluster.slices_at[-1]
    assert pairs.waypoints == {("ns", "waypoint")}  # the Services' waypoints, read first
    conversations = learning.latest().conversations
    assert conversations is not None and len(conversations.peers) == 1200
    assert sum(conversations.pods(w) for w in conversations.places) == 12_000
    # The read is its own round: the slices' expected time stays theirs.
    assert learning.schedule.expected[PEERS] == 0.5
    assert learning.schedule.expected[SLICE] == pytest.approx(0.04, rel=0.01)  # about 4,000 pods
    # A Deployment scaled to nothing is forgotten at the end of the next pass.
    cluster.pods = [p for p in pods if p[1] != "app-7"]
    while len(pairs.reads) < 2:
        _step(learning, clock)
    assert len(pairs.reads) >= 2
    places = learning.latest().conversations.places
    assert Workload("ns", "Deployment", "app-7") not in places


class UnrecordedPairsReader(PairsReader):
    """The pairs read from the flow metrics because the recording rule held none."""

    def read(self, known, at, waypoints):
        report = super().read(known, at, waypoints)
        report.rule_missing = True
        return report


def test_pairs_read_without_their_recording_rule_are_used_and_counted():
    clock = [0.0]
    cluster = SyntheticCluster(_deployments(200), clock, seconds_per_pod=1e-5)
    settings = settings_from_mapping({"prometheus": {"url": "http://unused"}})
    learning = BandwidthLearning(
        settings, cluster, clock=lambda: clock[0], peers=UnrecordedPairsReader(clock, 0.1)
    )
    kinds: list[str] = []
    while PEERS not in kinds:
        kinds.append(_step(learning, clock)[0])
    learned = learning.latest()
    assert learned.conversations is not None and learned.conversations.peers  # still pulling
    assert learned.peer_failures == {"no-recorded-pairs": 1}
