"""A node's running sums over its bookings in the ramp (bookings.py): its
unseen load against a measurement is a formula of these three numbers."""

# Bandwidth, bandwidth * time, pods.
RampSums = tuple[float, float, int]


def enter(ramp: dict[str, RampSums], node: str, bandwidth: float, at: float) -> None:
    """A row at ``at`` joins ``node``'s sums over the ramp."""
    sums = ramp.get(node)
    if sums is None:
        ramp[node] = (bandwidth, bandwidth * at, 1)
    else:
        ramp[node] = (sums[0] + bandwidth, sums[1] + bandwidth * at, sums[2] + 1)


def leave(ramp: dict[str, RampSums], node: str, bandwidth: float, at: float) -> None:
    """A row at ``at`` leaves ``node``'s sums over the ramp."""
    sums = ramp[node]
    if sums[2] == 1:
        del ramp[node]  # the sums start again from exact zeros
    else:
        ramp[node] = (sums[0] - bandwidth, sums[1] - bandwidth * at, sums[2] - 1)


def ramp_unseen(sums: RampSums, edge: float, window: float) -> float:
    """Unseen bytes/s of the rows summed in ``sums`` against ``edge``."""
    # max(): rounding must not turn an almost-measured pod's remainder negative.
    return max(0.0, (sums[1] - (edge - window) * sums[0]) / window)
