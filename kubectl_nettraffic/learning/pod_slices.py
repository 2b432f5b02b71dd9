"""Slices of the cluster's pods for the learner, by the last character of
the pod's name, so that a large cluster is read a slice per round instead
of in one query that takes a Prometheus core for seconds (bench.learning).

A pod's name is a DNS-1123 name, so it ends in a lowercase letter or a
digit. The controllers' names end in random characters:
``names.SimpleNameGenerator`` (k8s.io/apiserver/pkg/storage/names/generate.go)
appends ``utilrand.String(5)``, drawn from ``alphanums``
(k8s.io/apimachinery/pkg/util/rand/rand.go: "bcdfghjklmnpqrstvwxz2456789");
a StatefulSet's pods end in their ordinal. Slice ``i`` of ``n`` holds the
characters at positions i, i + n, ... of the random alphabet, then of the
characters it leaves out, so each slice gets a fair share of the
controllers' pods and every pod is in exactly one slice.

A slice's name match runs over every pod name in Prometheus's index, in
each of the query's selectors. A regular expression ending in a literal is
matched by that suffix first (model/labels/regexp.go, optimizeConcatRegex),
and only the names that end so run the expression; one ending in a
character class runs it on every name. At 150,000 pods (Prometheus 2.42,
bench.learning's cluster) a slice of one character took 0.38 s, one of two
0.74 s. So a cluster that needs more slices than half the random alphabet
is read in FINEST slices: one per random character, a literal suffix each,
and one for the characters the controllers never end a name in (a
StatefulSet's ordinals 0, 1 and 3, names written by hand).
"""

from dataclasses import dataclass

_RANDOM = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: alphanums
_OTHERS = "".join(c for c in "0123456789abcdefghijklmnopqrstuvwxyz" if c not in _RANDOM)
LAST_CHARACTERS = _RANDOM + _OTHERS
FINEST = len(_RANDOM) + 1  # one slice per random character, and the rest
MOST_SLICES = FINEST


@dataclass(frozen=True)
class PodSlice:
    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MOST_SLICES or not 0 <= self.index < self.count:
            raise ValueError(f"no slice {self.index} of {self.count}")

    @property
    def characters(self) -> str:
        if self.count == FINEST:
            return _RANDOM[self.index] if self.index < len(_RANDOM) else _OTHERS
        return LAST_CHARACTERS[self.index :: self.count]

    @property
    def whole(self) -> bool:
        return self.count == 1

    def holds(self, pod: str) -> bool:
        return self.whole or pod[-1:] in self.characters

    @property
    def pattern(self) -> str:
        """A regular expression for the slice's pod names; empty for the whole cluster."""
        if self.whole:
            return ""
        characters = self.characters
        return f".*{characters}" if len(characters) == 1 else f".*[{characters}]"


WHOLE = PodSlice(0, 1)
# The first slice a learner reads, before it knows the cluster's size: the
# finest slice, so that it costs little in any cluster, and the pods it
# holds say how many the cluster runs (pods_from_first_slice).
FIRST_SLICE = PodSlice(0, FINEST)


def pods_from_first_slice(pods: int) -> int:
    """The cluster's pods, estimated from FIRST_SLICE's: each random
    character ends about as many of the controllers' pods. Pods named
    otherwise (a StatefulSet's ordinals 0, 1 and 3, names written by hand)
    are not counted; the first pass reads them all and sizes the next."""
    return pods * len(_RANDOM)


def slices_for(pods: int, pods_per_slice: float) -> int:
    """How many slices ``pods`` pods need at ``pods_per_slice`` each: past
    half the random alphabet, FINEST (smaller slices, and cheaper to match)."""
    if pods <= 0 or pods_per_slice <= 0:
        return 1
    needed = max(1, -(-pods // max(1, int(pods_per_slice))))
    return needed if needed <= len(_RANDOM) // 2 else FINEST
