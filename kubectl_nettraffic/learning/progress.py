"""How far the learner has got, for /metrics: its rounds and their query
time by kind since it started (its budget, learning.prometheusShare, is
query time), the passes over every pod it finished and the slices of the
one under way. At 150,000 pods a pass takes half an hour or more and the
pairs come only after one, so an operator waiting for them reads here how
far the pass is and what the learner spends of its budget.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LearnerProgress:
    # By round kind (schedule.py: slice, young, peers). The first pass's
    # pod count is a round in the slices' part of the budget: a slice here.
    rounds: Mapping[str, int] = field(default_factory=dict)
    query_seconds: Mapping[str, float] = field(default_factory=dict)
    passes: int = 0  # over every pod, finished
    slices: int = 1  # of a pass, the one under way
    slices_read: int = 0  # of the pass under way
