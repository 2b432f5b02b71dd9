"""The learner's slices of the pods: every pod in exactly one, sized to the cluster."""

import string

import pytest

from kubectl_nettraffic.learning.pod_slices import FINEST, MOST_SLICES, PodSlice, slices_for

# A pod name ends in a lowercase letter or a digit (DNS-1123).
LAST = string.ascii_lowercase + string.digits
RANDOM = "bcdfghjklmnpqrstvwxz2456789"  # what the controllers' generated names end in


@pytest.mark.parametrize("count", range(1, MOST_SLICES + 1))
def test_every_pod_name_is_in_exactly_one_slice(count):
    for last in LAST:
        holding = [i for i in range(count) if PodSlice(i, count).holds(f"web-7d9c4b-x{last}")]
        assert len(holding) == 1, (last, holding)
    # Each slice gets a fair share of the generated names' last characters
    # (the finest slicing: one each, and a slice for the rest).
    shares = [sum(c in PodSlice(i, count).characters for c in RANDOM) for i in range(count)]
    if count == FINEST:
        shares.remove(0)
    assert max(shares) - min(shares) <= 1 and min(shares) >= 1


def test_a_slice_s_pattern_is_its_characters():
    assert PodSlice(0, 1).pattern == "" and PodSlice(0, 1).holds("anything")
    assert PodSlice(1, 14).pattern == ".*[ct3]"
    assert PodSlice(1, 14).holds("web-abc-xyzzt") and not PodSlice(1, 14).holds("web-0")
    # The finest slices are literal suffixes, which Prometheus matches without
    # running the expression; the last holds what the controllers never write.
    assert PodSlice(0, FINEST).pattern == ".*b" and PodSlice(26, FINEST).pattern == ".*9"
    assert PodSlice(FINEST - 1, FINEST).holds("db-0") and PodSlice(FINEST - 1, FINEST).holds("db-1")
    assert not PodSlice(FINEST - 1, FINEST).holds("db-2")


@pytest.mark.parametrize(
    ("pods", "per_slice", "slices"),
    [
        (0, 5000, 1),
        (4000, 5000, 1),
        (5001, 5000, 2),
        (150_000, 12_000, 13),
        (150_000, 11_000, FINEST),
        (150_000, 100, FINEST),
    ],
)
def test_slices_for_the_cluster_s_size(pods, per_slice, slices):
    assert slices_for(pods, per_slice) == slices


@pytest.mark.parametrize(("index", "count"), [(0, 0), (1, 1), (0, MOST_SLICES + 1)])
def test_a_slice_that_cannot_exist_is_refused(index, count):
    with pytest.raises(ValueError, match=f"no slice {index} of {count}"):
        PodSlice(index, count)
