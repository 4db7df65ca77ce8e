"""The gateway benchmark's interleaving (every target as often first, and after every other),
and its reading of the gateway's `Server-Timing`."""

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.gateway_latency import balanced_orders, server_timing


@given(st.integers(min_value=1, max_value=12))
def test_balanced_orders_are_a_williams_design(count: int) -> None:
    orders = balanced_orders(count)
    assert len(orders) == (count if count % 2 == 0 else 2 * count)
    assert all(sorted(order) == list(range(count)) for order in orders)
    firsts = Counter(order[0] for order in orders)
    assert set(firsts) == set(range(count)) and len(set(firsts.values())) == 1
    follows = Counter((a, b) for order in orders for a, b in zip(order, order[1:], strict=False))
    if count > 1:
        assert len(follows) == count * (count - 1)  # every ordered pair of neighbours
        assert len(set(follows.values())) == 1  # each as often


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z_]{0,11}", fullmatch=True),
        st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 3)),
        max_size=5,
    ),
    st.sampled_from(["", " "]),
)
def test_server_timing_reads_back_every_duration(durations: dict, pad: str) -> None:
    """What the gateway writes (`name;dur=ms` joined by commas) reads back, and a metric
    without a duration (`cache;desc="hit"`) is left out."""
    header = f",{pad}".join(f"{name};dur={ms:.3f}" for name, ms in durations.items())
    header += f",{pad}cache;desc=hit" if header else "cache;desc=hit"
    assert server_timing(header) == pytest.approx(durations)
