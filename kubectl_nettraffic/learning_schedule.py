"""When the learner reads Prometheus next, and what: pure, on a given clock.

Two kinds of round. A *slice* round reads one slice of the pods
(pod_slices.py; the whole cluster when it is small). A *young* round reads
only the pods created within ``learning.youngPodAge``, so that a new
workload is learned within a round or two however long the slices take to
go round a large cluster; it runs only while the cluster is read in several
slices (a whole-cluster round already holds every young pod).

The budget is ``learning.prometheusShare`` of one Prometheus core: after a
round whose query took d seconds, no round of either kind starts for
d / share seconds, so however the rounds fall, Prometheus spends at most
that share of its time on them. Within it, a young round is due every
``learning.interval``, and a slice round every interval too, young rounds
going first when both are due.
"""

from dataclasses import dataclass

SLICE, YOUNG = "slice", "young"


@dataclass
class LearningSchedule:
    interval: float
    share: float
    quiet_until: float = 0.0  # the last round's d / share: nothing starts before
    slice_due: float = 0.0
    young_due: float = 0.0

    def next_round(self, sliced: bool) -> tuple[str, float]:
        """The next round's kind, and when it may start."""
        if sliced and self.young_due <= self.slice_due:
            return YOUNG, max(self.young_due, self.quiet_until)
        return SLICE, max(self.slice_due, self.quiet_until)

    def finished(self, kind: str, started: float, seconds: float) -> None:
        """A round of ``kind`` that started at ``started`` took ``seconds``."""
        self.quiet_until = started + seconds + seconds / self.share
        if kind == YOUNG:
            self.young_due = started + self.interval
        else:
            self.slice_due = started + self.interval
