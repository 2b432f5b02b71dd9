"""Round-trip percentiles, where a lost request counts as infinitely slow."""

import math
from collections.abc import Sequence

import numpy as np


def percentiles(pairs: Sequence[tuple[float, float]], qs: Sequence[float]) -> list[float]:
    """Percentiles in seconds of (send time, round trip or -1 for lost) pairs."""
    if not pairs:
        return [math.nan] * len(qs)
    values = np.array([math.inf if rtt < 0 else rtt for _, rtt in pairs])
    return [float(np.quantile(values, q, method="inverted_cdf")) for q in qs]
