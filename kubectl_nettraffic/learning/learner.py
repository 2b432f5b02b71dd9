"""The learner on a thread of its own: it reads per-pod traffic
(sources/pod_traffic.py) and updates the per-workload figures
(workload_bandwidth.py); the scoreboard puts the latest figures in each
snapshot. Its query is large in large clusters (bench.learning), so it
never runs inside a refresh and never delays the scores, and it reads a
large cluster a slice of the pods at a time (pod_slices.py), paced to
``learning.prometheusShare`` of any minute in query time, with the
pods of the workloads created in the last ``learning.youngWorkloadAge``
read between slices (learning/schedule.py). With a flow source
(``peers.source``), a round of its own after each pass's last slice reads
who talks to whom, in one query for the cluster, paced with the slices;
the pods' nodes come with their samples (learning/conversations.py). A
failed round is logged and costs that round only: what was learned stays.
"""

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.errors import NetTrafficError
from kubectl_nettraffic.kube.service_routing import ZONE, ServiceRouting
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.conversations import Conversations, PodPlaces, conversations_of
from kubectl_nettraffic.learning.peer_traffic import PAIRS_RULE, PeerReport
from kubectl_nettraffic.learning.pod_slices import (
    FIRST_SLICE,
    WHOLE,
    PodSlice,
    pods_from_first_slice,
    slices_for,
)
from kubectl_nettraffic.learning.pod_traffic import PodTrafficReport
from kubectl_nettraffic.learning.progress import LearnerProgress
from kubectl_nettraffic.learning.schedule import PEERS, SLICE, YOUNG, LearningSchedule
from kubectl_nettraffic.learning.workload_bandwidth import BandwidthLearner, LearnedBandwidth

log = logging.getLogger(__name__)

# Pods per slice before anything was measured: a guess on the safe side
# (bench.learning read about 15,000 pods a second); the first full pass
# over the cluster replaces it with what this Prometheus does.
FIRST_PODS_PER_SLICE = 5000.0
# A slice is sized to take this share of what slices may use of a minute:
# a slice's time varies from one to the next by a third or so
# (bench.learning), and one that takes longer than expected overruns the
# minute it ends in.
SLICE_OF_BUDGET = 0.5


class PodTrafficReader(Protocol):
    """Where the learner's samples come from (PodTrafficSource in the webhook)."""

    def pod_count(self) -> int:
        """How many pods the cluster runs: it reads every pod's series, so
        only where the first slice holds no pod to size the first pass."""
        ...

    def samples(self, pods: PodSlice = WHOLE) -> PodTrafficReport:
        """One slice's samples; what is missing, when nothing came back."""
        ...

    def young_samples(self) -> PodTrafficReport:
        """The samples of the pods of the workloads created within
        learning.youngWorkloadAge."""
        ...


class PeerReader(Protocol):
    """Where the pairs come from (PeerTrafficSource in the webhook)."""

    def read(
        self, known: Iterable[Workload], at: float, waypoints: frozenset[tuple[str, str]]
    ) -> PeerReport | None:
        """The pairs between ``known`` workloads as of ``at`` (the moment the
        pass's last slice was read); None without a flow source."""
        ...


class BandwidthLearning:
    def __init__(
        self,
        settings: Settings,
        reader: PodTrafficReader,
        clock: Callable[[], float] = time.monotonic,
        peers: PeerReader | None = None,
        services: Callable[[], ServiceRouting] | None = None,
    ) -> None:
        self.schedule = LearningSchedule(
            settings.learning.interval, settings.learning.prometheus_share
        )
        self.learner = BandwidthLearner.for_settings(settings)
        self.reader = reader
        self.peers = peers
        # How the called workloads' Services route (peers.routing services),
        # read with the pairs; None: as peers.routing says, without reading.
        self.services = services
        self.routing = settings.peers.routing
        self.places = PodPlaces()
        self.conversations: Conversations | None = None
        self._pairs_at: float | None = None  # a pass ended then: its pairs are due
        self.passes = 0  # passes over every pod done
        self._pairs_pass = 0  # the passes done when the pairs in use were read
        self.max_age = settings.peers.max_age_passes
        self.peer_failures: Counter[str] = Counter()  # failed flow reads, by reason
        self.clock = clock
        self._latest: LearnedBandwidth | None = None
        self.missing: tuple[str, ...] = ()
        self.last_round_seconds = 0.0
        # Rounds and their query time by kind, since the start (/metrics).
        self.rounds: Counter[str] = Counter()
        self.query_seconds: dict[str, float] = {}
        # The slices of the pass under way, and what the last pass measured.
        self.slices = 1
        self.next_slice = 0
        self.pods_per_slice = FIRST_PODS_PER_SLICE
        self._pass_pods = 0
        self._pass_seconds = 0.0
        self._sized = False  # the first pass is sized by its first slice; later ones by the last
        self._stop = threading.Event()

    def latest(self) -> LearnedBandwidth | None:
        return self._latest

    def next_round(self) -> tuple[str, float]:
        """The next round's kind, and when it may start (now at the earliest)."""
        return self.schedule.next_round(
            self.slices > 1, self.clock(), peers_due=self._pairs_at is not None
        )

    def update(self) -> str:
        """The next round, whenever its time (the benchmarks call this on
        their own clock): read, learn, publish (a reference swap readers see
        whole). Returns the round's kind."""
        kind, _ = self.next_round()
        started = self.clock()
        try:
            if kind == PEERS:
                self._read_peers()
                return kind
            if kind == YOUNG:
                report = self.reader.young_samples()
            elif self._sized:
                report = self.reader.samples(PodSlice(self.next_slice, self.slices))
            else:
                report = self.reader.samples(FIRST_SLICE)
                if not self._sized_by(report):
                    return kind  # the pass starts over, in fewer slices
            if self.peers is not None and not report.missing:
                self.places.record(report.samples)
                if kind == SLICE and self.next_slice == self.slices - 1:
                    self._pairs_at = report.evaluated_at
        except NetTrafficError as error:
            log.warning("learning: per-pod traffic unavailable this round: %s", error)
            return kind
        finally:
            self.last_round_seconds = self.clock() - started
            self.schedule.finished(kind, started, self.last_round_seconds)
            self._count(kind, self.last_round_seconds)
        if kind == SLICE:
            self._slice_done(len(report.samples), self.last_round_seconds)
            self.missing = report.missing
        if report.missing:
            return kind
        self.learner.observe(report.samples, report.evaluated_at)
        self._latest = self._published(self.learner.learned(report.evaluated_at))
        return kind

    def _sized_by(self, first: PodTrafficReport) -> bool:
        """Sizes the first pass from its first slice, read in the finest
        slices (FIRST_SLICE); True if the pass goes on in them. Counting
        the pods instead reads every pod's series: at 150,000 pods it took
        longer than a minute's budget for slices, and held the first slice
        off for as long as the budget needed to recover (bench.learning).
        A first slice without a pod counts them (a small cluster, or one
        whose pods the controllers did not name)."""
        self._sized = True
        pods = len(first.samples)
        cluster = pods_from_first_slice(pods) if pods else self.reader.pod_count()
        self.slices = slices_for(cluster, self.pods_per_slice)
        return self.slices == FIRST_SLICE.count

    def _count(self, kind: str, seconds: float) -> None:
        """One more round of ``kind``, failed or not; the published figures
        show it at once (a failed round publishes nothing else)."""
        self.rounds[kind] += 1
        self.query_seconds[kind] = self.query_seconds.get(kind, 0.0) + seconds
        if self._latest is not None:
            self._latest = replace(self._latest, progress=self._progress())

    def _progress(self) -> LearnerProgress:
        return LearnerProgress(
            dict(self.rounds), dict(self.query_seconds), self.passes, self.slices, self.next_slice
        )

    def _published(self, learned: LearnedBandwidth) -> LearnedBandwidth:
        """``learned`` with the learner's progress, and with a flow source
        the pairs in use, their age and the failed reads."""
        learned = replace(learned, progress=self._progress())
        if self.peers is None:
            return learned
        age = self.passes - self._pairs_pass
        return replace(
            learned,
            conversations=self.conversations,
            pairs_age=age,
            pairs_pull=age < self.max_age,
            peer_failures=dict(self.peer_failures),
        )

    def _read_peers(self) -> None:
        """The pairs, once a pass (after its last slice: every pod's node and
        workload read by then), among the workloads the learner knows, as
        of that slice; published with the figures learned so far. A failed
        read keeps the last pairs, and waits for the next pass."""
        assert self.peers is not None and self._pairs_at is not None
        at, self._pairs_at = self._pairs_at, None
        known = self.places.workloads() | set(self.learner.histograms)
        routing = self._service_routing()  # with Istio ambient's waypoints
        try:
            pairs = self.peers.read(known, at, routing.waypoints)
        except NetTrafficError as error:
            self.peer_failures[getattr(error, "reason", "error")] += 1
            log.warning("learning: flow metrics between workloads unavailable: %s", error)
            pairs = None
        if pairs is not None and pairs.rule_missing:
            self.peer_failures["no-recorded-pairs"] += 1
            log.warning(
                "learning: peers.recordingRule is on but Prometheus holds no %s: the pairs "
                "were read from the flow metrics; check that the chart's PrometheusRule is "
                "loaded (prometheusRule.labels against your Prometheus's ruleSelector)",
                PAIRS_RULE,
            )
        if pairs is not None:
            self.conversations = conversations_of(
                pairs, self.places, at, routing.pods, routing.notes, self.routing == ZONE
            )
            self._pairs_pass = self.passes
        if self._latest is not None:
            self._latest = self._published(self._latest)

    def _service_routing(self) -> ServiceRouting:
        """How the Services route, for peers.routing services: read from the
        cluster; a failed read spreads every pair evenly this pass (counted
        as a failed flow read, ``services-`` and its reason)."""
        if self.routing != "services":
            return ServiceRouting()
        if self.services is None:
            return ServiceRouting(notes=Counter({"no-api": 1}))
        try:
            return self.services()
        except NetTrafficError as error:
            self.peer_failures[f"services-{getattr(error, 'reason', 'error')}"] += 1
            log.warning("learning: Services' routing unavailable, pairs spread evenly: %s", error)
            return ServiceRouting()

    def _slice_done(self, pods: int, seconds: float) -> None:
        self._pass_pods += pods
        self._pass_seconds += seconds
        self.next_slice += 1
        if self.next_slice < self.slices:
            return
        self.places.end_pass()
        self.passes += 1
        # A pass is done: size the next one's slices so that each takes
        # SLICE_OF_BUDGET of what slices may use of a minute, at this pass's
        # speed, for the pods this one read (no count again).
        if self._pass_pods and self._pass_seconds > 0:
            speed = self._pass_pods / self._pass_seconds
            budget = self.schedule.slice_budget(sliced=self.slices > 1)
            self.pods_per_slice = speed * budget * SLICE_OF_BUDGET
        if self._pass_pods:
            self.slices = slices_for(self._pass_pods, self.pods_per_slice)
        else:
            self._sized = False  # nothing read: sized again by its first slice
        self.next_slice = self._pass_pods = 0
        self._pass_seconds = 0.0

    def start(self) -> "BandwidthLearning":
        threading.Thread(target=self._run, name="learning", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            _, at = self.next_round()
            if at > self.clock():
                # Looked at again on waking, an interval at most.
                if self._stop.wait(min(at - self.clock(), self.schedule.interval)):
                    return
                continue
            self.update()
