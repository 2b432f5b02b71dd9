"""When the learner reads Prometheus next, and what: pure, on a given clock.

Three kinds of round. A *slice* round reads one slice of the pods
(pod_slices.py; the whole cluster when it is small). A *peers* round reads
who talks to whom (with a flow source, once a pass, as soon as its last
slice is read and the budget has room): it shares the slices' part of the
budget as if it were one of them (the slices keep their cadence), so a
flow query slower than a slice is paced as a slow slice is, and the
slices' expected time stays their own. A *young* round reads
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
rounds of a minute are expected to leave (at the pace they ran: one an
interval, or fewer where their half held them back; half the budget at
least), so a wave of new workloads never stops the rest of the cluster
being read. A round bigger than its part runs alone (once the rounds
before it have left the window), and the next round of its part, of
either kind, starts no sooner than 60 s x its time / the part after it
started. A minute that holds one is over the part by what it takes
beyond it; every longer stretch keeps to it. A round slower than expected
overruns once; the next waits. The refresh's node query is not counted
here: it is the product's fixed cost, set by the number of nodes and
refresh.interval (bench.learning reports it beside the learner's).
"""

from collections import deque
from dataclasses import dataclass, field

SLICE, YOUNG, PEERS = "slice", "young", "peers"
MINUTE = 60.0  # the budget's window: the goal is a share of a core per minute
YOUNG_MEAN_OF = 8  # young rounds: an even number, as looks and reads between them alternate


@dataclass
class LearningSchedule:
    interval: float
    share: float
    slice_due: float = 0.0
    young_due: float = 0.0
    # (kind, start, seconds) of the rounds that may still be within a minute
    rounds: list[tuple[str, float, float]] = field(default_factory=list)
    expected: dict[str, float] = field(default_factory=dict)  # the last round of each kind
    # part -> (start, seconds) of its last round, kept after it leaves the window
    last: dict[str, tuple[float, float]] = field(default_factory=dict)
    # (start, seconds) of the last young rounds, for what they are expected to take a minute
    young: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=YOUNG_MEAN_OF))

    @property
    def budget(self) -> float:
        """Query seconds allowed in any minute."""
        return self.share * MINUTE

    def slice_budget(self, sliced: bool) -> float:
        """What slice rounds may use of a minute: what the young rounds due
        in it (at the pace they ran, at their recent mean) are expected to
        leave, half at least."""
        if not sliced:
            return self.budget
        young_rounds = -(-MINUTE // self._young_period())  # started within any minute, at most
        # Their mean over the last few, not the last one: young rounds that
        # look for new controllers every other round alternate between a
        # read of every controller and almost nothing, and a slice paced
        # after a cheap one would spend the budget the next look needs.
        young = self.young
        each = sum(seconds for _, seconds in young) / len(young) if young else 0.0
        return max(self.budget / 2, self.budget - young_rounds * each)

    def _young_period(self) -> float:
        """How far apart the last young rounds started: their interval, or
        more where their half of the budget held them back. Counted at one
        an interval, rounds held back left their part of the budget unused
        and the slices at half: 14% of the budget unspent over an hour at
        150,000 pods (docs/design/peers.md, "What it costs to learn").
        A stretch without young rounds (the cluster read whole) counts in
        the spacing until eight more have run."""
        young = self.young
        if len(young) < 2:
            return self.interval
        return max(self.interval, (young[-1][0] - young[0][0]) / (len(young) - 1))

    def next_round(
        self, sliced: bool, now: float = 0.0, peers_due: bool = False
    ) -> tuple[str, float]:
        """The next round's kind, and when it may start (``now`` at the
        earliest): whichever kind may start first, a young round on a tie.
        ``peers_due``: a peers round takes the next slice's turn."""
        kind = PEERS if peers_due else SLICE
        due = now if peers_due else max(self.slice_due, now)  # a pass's pairs: at once
        at = self._room(kind, due, self.slice_budget(sliced))
        if sliced:
            young_at = self._room(YOUNG, max(self.young_due, now), self.budget / 2)
            if young_at <= at:
                return YOUNG, young_at
        return kind, at

    def _room(self, kind: str, due: float, budget: float) -> float:
        """The first time from ``due`` on when the query time of the minute
        before it (of the rounds that share ``kind``'s part), plus this
        round's expected time, fits ``budget``. Past rounds only leave the
        window, so every minute that ends during this round fits too."""
        cost = self.expected.get(kind, 0.0)
        mine = [(s, d) for k, s, d in self.rounds if _part(k) == _part(kind)]
        last = self.last.get(_part(kind))
        if last is not None and last[1] > budget > 0:
            # The last round was over the part alone: the part keeps its
            # budget on average by waiting what that round took beyond it.
            due = max(due, last[0] + MINUTE * last[1] / budget)
        # The spent time only falls as rounds leave: try each such moment in turn.
        for at in sorted({due, *(s + d + MINUTE for s, d in mine if s + d + MINUTE > due)}):
            spent = sum(max(0.0, min(s + d, at) - max(s, at - MINUTE)) for s, d in mine)
            if spent + cost <= budget + 1e-9:
                return at
        # Over the budget alone: alone in its minute.
        return max([due, *(s + d + MINUTE for s, d in mine)])

    def finished(self, kind: str, started: float, seconds: float) -> None:
        """A round of ``kind`` that started at ``started`` took ``seconds``."""
        self.expected[kind] = seconds
        self.last[_part(kind)] = (started, seconds)
        self.rounds = [r for r in self.rounds if r[1] + r[2] + MINUTE > started]
        self.rounds.append((kind, started, seconds))
        if kind == YOUNG:
            self.young_due = started + self.interval
            self.young.append((started, seconds))
        elif kind == SLICE:
            self.slice_due = started + self.interval


def _part(kind: str) -> str:
    """Whose part of the budget a round of ``kind`` counts in."""
    return YOUNG if kind == YOUNG else SLICE
