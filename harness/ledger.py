"""The in-flight ledger's definition, summed the slow way: the oracle the
ledger's tests and its benchmark compare the running sums against."""

from collections.abc import Iterable


def unseen_summed_over_every_booking(
    bookings: Iterable[tuple[str, float, float]],
    measured_at: float,
    pod_startup: float,
    window: float,
) -> dict[str, tuple[float, int]]:
    """node -> (unseen bytes/s, pods) from (node, bandwidth, at) bookings."""
    totals: dict[str, tuple[float, int]] = {}
    for node, bandwidth, at in bookings:
        visible = min(1.0, max(0.0, (measured_at - at - pod_startup) / window))
        unseen = bandwidth * (1.0 - visible)
        if unseen > 0:
            total, pods = totals.get(node, (0.0, 0))
            totals[node] = (total + unseen, pods + 1)
    return totals
