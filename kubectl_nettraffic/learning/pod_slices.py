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
"""

from dataclasses import dataclass

_RANDOM = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: alphanums
_OTHERS = "".join(c for c in "0123456789abcdefghijklmnopqrstuvwxyz" if c not in _RANDOM)
LAST_CHARACTERS = _RANDOM + _OTHERS
MOST_SLICES = len(_RANDOM)  # past this, a slice would hold no random character


@dataclass(frozen=True)
class PodSlice:
    index: int
    count: int

    def __post_init__(self) -> None:
        if not 1 <= self.count <= MOST_SLICES or not 0 <= self.index < self.count:
            raise ValueError(f"no slice {self.index} of {self.count}")

    @property
    def characters(self) -> str:
        return LAST_CHARACTERS[self.index :: self.count]

    @property
    def whole(self) -> bool:
        return self.count == 1

    def holds(self, pod: str) -> bool:
        return self.whole or pod[-1:] in self.characters

    @property
    def pattern(self) -> str:
        """A regular expression for the slice's pod names; empty for the whole cluster."""
        return "" if self.whole else f".*[{self.characters}]"


WHOLE = PodSlice(0, 1)


def slices_for(pods: int, pods_per_slice: float) -> int:
    """How many slices ``pods`` pods need at ``pods_per_slice`` each."""
    if pods <= 0 or pods_per_slice <= 0:
        return 1
    return max(1, min(MOST_SLICES, -(-pods // max(1, int(pods_per_slice)))))
