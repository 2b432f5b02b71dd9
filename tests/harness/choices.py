"""The one exact choice over a snapshot, as an admission makes it, and the
full scan it must equal: for tests that look at the choice alone."""

from collections.abc import Callable, Mapping

from kubectl_nettraffic.measuring.measurement import Snapshot
from kubectl_nettraffic.ranking.candidates import Heaps, Ranked
from kubectl_nettraffic.ranking.node_points import NodePoints
from kubectl_nettraffic.ranking.replica_share import ReplicaShare
from kubectl_nettraffic.scoring.node_scores import NodeScore


def heaps_over(
    snapshot: Snapshot,
    unseen: Mapping[str, tuple[float, int]] | None = None,
    share: ReplicaShare | None = None,
) -> Heaps:
    """The heaps an in-flight state builds over ``snapshot`` (``share``: this
    replica's place among the replicas steering)."""
    grouped_by = None if share is None else (share.place, share.blocks.replicas)
    return Heaps.build(snapshot, unseen if unseen is not None else {}, grouped_by, {}, {}, None)


def heap_choice(
    heaps: Heaps, count: int, bandwidth: float = 0.0, concurrent: float = 1.0
) -> list[Ranked]:
    """``CandidateHeap.best`` of the shared heap for a pod of ``bandwidth``."""
    others = 0.0 if heaps.share is None else bandwidth * concurrent
    points = NodePoints(heaps.groups, heaps.least_penalty, bandwidth, others)
    return heaps.shared.best(count, points)


def choose(
    snapshot: Snapshot,
    count: int,
    bandwidth: float = 0.0,
    unseen: Mapping[str, tuple[float, int]] | None = None,
    share: ReplicaShare | None = None,
) -> list[tuple[str, float]]:
    """The nodes the choice gives a pod of ``bandwidth`` without
    constraints, best first, with their scores for it."""
    concurrent = 1.0 if share is None else share.concurrent
    chosen = heap_choice(heaps_over(snapshot, unseen, share), count, bandwidth, concurrent)
    return [(score.name, effective) for effective, _, score in chosen]


def scanned(
    snapshot: Snapshot,
    count: int,
    points: Callable[[NodeScore], float],
    unseen: Mapping[str, tuple[float, int]] | None = None,
) -> list[tuple[float, str]]:
    """The full scan: every candidate's live score plus ``points``, best
    first (ties by position), as (that score, node)."""
    unseen = unseen or {}
    ranked = sorted(
        (
            (s.score_with(unseen.get(s.name, (0.0, 0))[0]) + points(s), -i, s.name)
            for i, s in enumerate(snapshot.candidates)
        ),
        reverse=True,
    )
    return [(effective, name) for effective, _, name in ranked[:count]]
