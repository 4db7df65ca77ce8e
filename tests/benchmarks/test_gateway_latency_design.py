"""The gateway benchmark's interleaving: every target as often first, and after every other."""

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.gateway_latency import balanced_orders


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
