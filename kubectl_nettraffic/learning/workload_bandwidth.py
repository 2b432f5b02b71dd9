"""What a pod will send, learned per workload from what its pods sent.

Pure: samples in, figures out; the samples come from Prometheus
(sources/pod_traffic.py) in the refresher process.

The model is the Vertical Pod Autoscaler's, for network instead of CPU
(kubernetes/autoscaler, vertical-pod-autoscaler/pkg/recommender):

- each workload keeps a decaying histogram of its pods' bandwidth, one
  sample per pod each time the learner reads it (every round in a small
  cluster, once per pass over the slices in a large one;
  learning/schedule.py) (util/decaying_histogram.go: a sample's weight
  doubles every half-life of its time, which is a decay of every older one);
  buckets grow by 5% each (model/aggregations_config.go,
  DefaultHistogramBucketSizeGrowth), so a figure is within 5% of the sample;
- the half-life is 24 h (DefaultCPUHistogramDecayHalfLife): a quiet minute,
  or an hour, does not erase a day of history, and a workload that changed
  for good is followed within a day or so;
- the figure is the 90th percentile (logic/recommender.go, the target CPU
  percentile) plus a 15% margin (its safetyMarginFraction).

A pod's rate() covers the whole window only once it has sent for that
long; before, it shows the share of the window it has been sending for, as
the in-flight bookings count it (inflight/bookings.py): a pod created at ``c``
sends from ``c + pod_startup``. A sample of such a pod is scaled up to what
the pod sends, and a pod that has sent for less than a quarter of the
window is left out (its rate rests on a scrape or two, and the scaling
would multiply their error). Unscaled, a burst's first samples said a
fraction of what its pods send, and that was the workload's figure until
they had sent for a whole window: the next burst of the workload, booked
at it, piled onto nodes that looked quiet (docs/design/learned-ramp.md).

A workload is its controller: a ReplicaSet is rolled up to its Deployment,
so a rollout keeps its history. Pods of an unlearned workload are
booked at a cluster-wide figure: what pods sent while their own workload
was not learned yet, the mean of the samples of young pods (created within
the window and podStartup) of workloads with fewer than min_samples
samples. Those are the pods that figure is for; the pods the cluster has
run for long say less of them: among light Deployments learned long ago, a
new heavy workload's bursts were booked at the light pods' figure
(docs/design/new-workloads.md). Until such samples exist it is the mean of
every pod's samples. A mean, not a percentile with a margin: that booked a
burst of an unknown workload at about twice what a typical pod sends, and
the burst's nodes then looked fuller than they were until the
measurements showed its pods (docs/design/learned-ramp.md).
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubectl_nettraffic.config import Settings
from kubectl_nettraffic.kube.workloads import Workload
from kubectl_nettraffic.learning.conversations import Conversations
from kubectl_nettraffic.learning.pod_sample import PodSample
from kubectl_nettraffic.learning.progress import LearnerProgress
from kubectl_nettraffic.scoring.node_scores import directional_load

# Bytes/s. Below the first bucket everything is "about nothing".
FIRST_BUCKET = 1024.0
GROWTH = 1.05
MAX_BUCKET = 2000  # 1 KiB/s * 1.05**2000 is far beyond any NIC
# Weights below this (relative to the newest sample's) are dropped: VPA's epsilon.
EPSILON = 1e-4
# A pod sending for less than this share of the window is not sampled yet.
LEAST_SEEN_SHARE = 0.25


def bucket_of(value: float) -> int:
    if value < FIRST_BUCKET:
        return 0
    return min(MAX_BUCKET, 1 + int(math.log(value / FIRST_BUCKET, GROWTH)))


def bucket_top(index: int) -> float:
    """The upper bound of a bucket: a percentile answers with it, as VPA's does."""
    return FIRST_BUCKET * GROWTH**index


class DecayingHistogram:
    """Weights per bucket; newer samples weigh more (VPA's decaying histogram).

    A sample at ``t`` weighs ``2 ** ((t - reference) / half_life)``; the
    reference moves forward (and every weight is rescaled) before the
    exponent grows large, so the numbers stay small.
    """

    __slots__ = ("half_life", "reference", "samples", "total", "weights")

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self.reference: float | None = None
        self.weights: dict[int, float] = {}
        self.total = 0.0
        self.samples = 0

    def add(self, value: float, at: float) -> None:
        if self.reference is None:
            self.reference = at
        elif at - self.reference > 20 * self.half_life:
            self._rebase(at)
        weight = 2.0 ** ((at - self.reference) / self.half_life)
        bucket = bucket_of(value)
        self.weights[bucket] = self.weights.get(bucket, 0.0) + weight
        self.total += weight
        self.samples += 1

    def _rebase(self, at: float) -> None:
        assert self.reference is not None
        factor = 2.0 ** ((self.reference - at) / self.half_life)
        self.weights = {b: w * factor for b, w in self.weights.items() if w * factor > EPSILON}
        self.total = sum(self.weights.values())
        self.reference = at

    def percentile(self, share: float) -> float:
        if self.total <= 0:
            return 0.0
        needed, seen = share * self.total, 0.0
        for bucket in sorted(self.weights):
            seen += self.weights[bucket]
            if seen >= needed:
                return bucket_top(bucket)
        return bucket_top(max(self.weights))

    def mean(self) -> float:
        """The weighted mean, each sample at its bucket's top, as the percentiles."""
        if self.total <= 0:
            return 0.0
        return sum(bucket_top(b) * w for b, w in self.weights.items()) / self.total


@dataclass(frozen=True)
class LearnedBandwidth:
    """What the steering uses: workload -> bytes/s, and the cluster-wide figure."""

    workloads: Mapping[Workload, float] = field(default_factory=dict)
    # For pods of unlearned workloads (see the module's doc); None
    # until enough pods were seen.
    cluster: float | None = None
    learned_at: float = 0.0
    # Who talks to whom, and where (learning/conversations.py); None without
    # a flow source (peers.source: none) or before the first pairs were read.
    conversations: Conversations | None = None
    # Learner passes since those pairs were read; past peers.maxAgePasses
    # they no longer pull (``pairs_pull`` false) but are still shown.
    pairs_age: int = 0
    pairs_pull: bool = True
    # Failed flow reads so far, by reason (SourceError.reason).
    peer_failures: Mapping[str, int] = field(default_factory=dict)
    # The learner's rounds and passes so far (/metrics).
    progress: LearnerProgress = field(default_factory=LearnerProgress)

    @property
    def pulling(self) -> Conversations | None:
        """The conversations that steer pods: None once they are too old."""
        return self.conversations if self.pairs_pull else None


@dataclass
class BandwidthLearner:
    """Histograms per workload and over the cluster, fed one refresh at a time."""

    percentile: float = 0.9
    margin: float = 0.15
    half_life: float = 24 * 3600.0
    min_samples: int = 3  # a workload's figure is used once it has this many
    direction: str = "both"  # receive | transmit | both, as prometheus.direction
    window: float = 0.0  # prometheus.window, the rates' window; 0: samples are not scaled
    pod_startup: float = 0.0  # steering.podStartup: a pod sends from this long after its creation
    histograms: dict[Workload, DecayingHistogram] = field(default_factory=dict)
    cluster_histogram: DecayingHistogram | None = None
    # Young pods' samples of unlearned workloads (see the module's doc).
    newcomer_histogram: DecayingHistogram | None = None

    @classmethod
    def for_settings(cls, settings: Settings, min_samples: int | None = None) -> "BandwidthLearner":
        """A learner as ``learning.*``, ``prometheus.direction``,
        ``prometheus.window`` and ``steering.podStartup`` configure it."""
        learning = settings.learning
        return cls(
            learning.percentile,
            learning.margin,
            learning.half_life,
            learning.min_samples if min_samples is None else min_samples,
            settings.prometheus.direction,
            settings.prometheus.window,
            settings.steering.pod_startup,
        )

    def bandwidth(self, sample: PodSample) -> float:
        return directional_load(sample, self.direction)

    def sending(self, sample: PodSample, at: float) -> float | None:
        """What the pod sends, from its rates at ``at``: scaled up when it
        has sent for part of the window only; None while that part is too
        short to say."""
        value = self.bandwidth(sample)
        if sample.created is None or self.window <= 0:
            return value
        sent_for = at - sample.created - self.pod_startup
        if sent_for >= self.window:
            return value
        if sent_for < LEAST_SEEN_SHARE * self.window:
            return None
        return value * self.window / sent_for

    def observe(self, samples: Iterable[PodSample], at: float) -> None:
        if self.cluster_histogram is None:
            self.cluster_histogram = DecayingHistogram(self.half_life)
            self.newcomer_histogram = DecayingHistogram(self.half_life)
        assert self.newcomer_histogram is not None
        for sample in samples:
            value = self.sending(sample, at)
            if value is None or not math.isfinite(value) or value < 0:
                continue
            self.cluster_histogram.add(value, at)
            if sample.workload is not None:
                histogram = self.histograms.get(sample.workload)
                if histogram is None:
                    histogram = self.histograms[sample.workload] = DecayingHistogram(self.half_life)
                if sample.created is not None and histogram.samples < self.min_samples:
                    self.newcomer_histogram.add(value, at)  # a young pod, its workload unlearned
                histogram.add(value, at)

    def figure(self, histogram: DecayingHistogram) -> float:
        return histogram.percentile(self.percentile) * (1.0 + self.margin)

    def learned(self, at: float) -> LearnedBandwidth:
        workloads = {
            workload: self.figure(h)
            for workload, h in self.histograms.items()
            if h.samples >= self.min_samples
        }
        cluster = None
        for histogram in (self.newcomer_histogram, self.cluster_histogram):
            if histogram is not None and histogram.samples >= self.min_samples:
                cluster = histogram.mean()
                break
        return LearnedBandwidth(workloads, cluster, at)
