"""When the learner reads Prometheus next, and what: pure, on a given clock.

Two kinds of round. A *slice* round reads one slice of the pods
(pod_slices.py; the whole cluster when it is small). A *young* round reads
only the pods of the workloads created within ``learning.youngWorkloadAge``,
so that a new workload is learned within a round or two however long the
slices take to go round a large cluster; it runs only while the cluster is
read in several slices (a whole-cluster round already holds every pod).

The budget is ``learning.prometheusShare`` of any minute in query time
(wall-clock, from sending a query to its parsed answer; what Prometheus
spends on it in CPU is a little less): the rounds aim to keep their query
time within any 60 s at most share x 60 s. A round starts only once the
query time of the last minute, plus what the round is expected to take
(the last one of its kind), fits its part of it; one slower than expected
overshoots by its excess.
Young rounds are small and due every ``learning.interval``; they have half
the budget to themselves and are never held up by a slice, so a new
workload is read as soon as its pods send. Slice rounds use what the young
rounds of a minute are expected to leave (half the budget at least), so a
wave of new workloads never stops the rest of the cluster being read. A
slice bigger than its part runs alone (once the last slice has left the
window), and no more often than keeps its part on average: 60 s x its
time / its part after the last one started. A minute that holds one is
over that part by what the slice takes beyond it; every longer stretch
keeps to it. A round slower than expected overruns once; the next waits. The
refresh's node query is not counted here: it is the product's fixed cost,
set by the number of nodes and refresh.interval (bench.learning reports it
beside the learner's).
"""

from dataclasses import dataclass, field

SLICE, YOUNG = "slice", "young"
MINUTE = 60.0  # the budget's window: the goal is a share of a core per minute


@dataclass
class LearningSchedule:
    interval: float
    share: float
    slice_due: float = 0.0
    young_due: float = 0.0
    # (kind, start, seconds) of the rounds that may still be within a minute
    rounds: list[tuple[str, float, float]] = field(default_factory=list)
    expected: dict[str, float] = field(default_factory=dict)  # the last round of each kind
    started: dict[str, float] = field(default_factory=dict)  # ... and when it started

    @property
    def budget(self) -> float:
        """Query seconds allowed in any minute."""
        return self.share * MINUTE

    def slice_budget(self, sliced: bool) -> float:
        """What slice rounds may use of a minute: what the young rounds due
        in it (one every interval) are expected to leave, half at least."""
        if not sliced:
            return self.budget
        young_rounds = -(-MINUTE // self.interval)  # started within any minute, at most
        young = young_rounds * self.expected.get(YOUNG, 0.0)
        return max(self.budget / 2, self.budget - young)

    def next_round(self, sliced: bool, now: float = 0.0) -> tuple[str, float]:
        """The next round's kind, and when it may start (``now`` at the
        earliest): whichever kind may start first, a young round on a tie."""
        at = self._room(SLICE, max(self.slice_due, now), self.slice_budget(sliced))
        if sliced:
            young_at = self._room(YOUNG, max(self.young_due, now), self.budget / 2)
            if young_at <= at:
                return YOUNG, young_at
        return SLICE, at

    def _room(self, kind: str, due: float, budget: float) -> float:
        """The first time from ``due`` on when the query time of the minute
        before it (of rounds of ``kind``), plus this round's expected time,
        fits ``budget``. Past rounds only leave the window, so every minute
        that ends during this round fits too."""
        cost = self.expected.get(kind, 0.0)
        mine = [(s, d) for k, s, d in self.rounds if k == kind]
        # The spent time only falls as rounds leave: try each such moment in turn.
        for at in sorted({due, *(s + d + MINUTE for s, d in mine if s + d + MINUTE > due)}):
            spent = sum(max(0.0, min(s + d, at) - max(s, at - MINUTE)) for s, d in mine)
            if spent + cost <= budget + 1e-9:
                return at
        # Over the budget alone: alone in its minute, and spaced to keep the
        # budget on average.
        last = self.started.get(kind)
        spaced = [] if last is None or budget <= 0 else [last + MINUTE * cost / budget]
        return max([due, *(s + d + MINUTE for s, d in mine), *spaced])

    def finished(self, kind: str, started: float, seconds: float) -> None:
        """A round of ``kind`` that started at ``started`` took ``seconds``."""
        self.expected[kind] = seconds
        self.started[kind] = started
        self.rounds = [r for r in self.rounds if r[1] + r[2] + MINUTE > started]
        self.rounds.append((kind, started, seconds))
        if kind == YOUNG:
            self.young_due = started + self.interval
        else:
            self.slice_due = started + self.interval
