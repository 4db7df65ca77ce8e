"""The shared statistics: intervals that hold their promises, a symmetric rank test."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evolution.stats import mann_whitney, mean_interval, wilson_interval

confidences = st.floats(min_value=0.5, max_value=0.999)
values = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
# Few distinct values, so ties (the usual case for 0/1 rewards) are exercised too.
tied_values = st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=1, max_size=40)
samples = st.one_of(tied_values, st.lists(values, min_size=1, max_size=40))


@st.composite
def counts(draw: st.DrawFn) -> tuple[int, int]:
    total = draw(st.integers(min_value=1, max_value=10_000))
    return draw(st.integers(min_value=0, max_value=total)), total


@given(counts(), confidences)
def test_wilson_bounds_contain_the_rate_within_zero_and_one(
    count: tuple[int, int], confidence: float
) -> None:
    successes, total = count
    low, high = wilson_interval(successes, total, confidence)
    assert 0.0 <= low <= successes / total <= high <= 1.0


def test_wilson_known_values_and_edges() -> None:
    low, high = wilson_interval(5, 10)
    assert (low, high) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0
    # More evidence, a narrower interval around the same rate.
    assert wilson_interval(500, 1000)[1] - wilson_interval(500, 1000)[0] < high - low
    with pytest.raises(ValueError, match="successes <= total"):
        wilson_interval(3, 2)
    with pytest.raises(ValueError, match="confidence"):
        wilson_interval(1, 2, confidence=1.0)


@given(st.lists(values, min_size=1, max_size=50), confidences)
def test_mean_interval_contains_the_mean(data: list[float], confidence: float) -> None:
    interval = mean_interval(data, confidence)
    assert interval is not None
    mean, low, high = interval
    assert low <= mean <= high
    assert mean == pytest.approx(math.fsum(data) / len(data))


def test_mean_interval_known_values_and_edges() -> None:
    mean, low, high = mean_interval([1.0, 2.0, 3.0, 4.0])  # type: ignore[misc]
    # t(0.975, 3) = 3.1824, s = 1.2910: half width 3.1824 * 1.2910 / 2.
    assert (mean, low, high) == pytest.approx((2.5, 0.4457, 4.5543), abs=1e-4)
    assert mean_interval([]) is None
    assert mean_interval([0.7]) == (0.7, 0.7, 0.7)
    assert mean_interval([0.3] * 5) == pytest.approx((0.3, 0.3, 0.3))
    with pytest.raises(ValueError, match="finite"):
        mean_interval([1.0, math.nan])


@given(samples, samples)
def test_mann_whitney_effect_is_a_probability_and_symmetric(
    baseline: list[float], candidate: list[float]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ties and constant samples must not warn
        u, p, effect = mann_whitney(baseline, candidate)
        u_back, p_back, effect_back = mann_whitney(candidate, baseline)
    assert 0.0 <= effect <= 1.0 and 0.0 <= p <= 1.0
    assert effect == pytest.approx(1.0 - effect_back)
    assert u + u_back == pytest.approx(len(baseline) * len(candidate))
    assert p == pytest.approx(p_back)


def test_mann_whitney_known_values() -> None:
    u, p, effect = mann_whitney([1.0, 2.0], [3.0, 4.0])
    assert (u, effect) == (4.0, 1.0)  # every candidate value beats every baseline value
    assert p == pytest.approx(1 / 3)  # exact: 2 of the 6 orderings are this extreme
    assert mann_whitney([0.0] * 30, [1.0] * 30)[1] < 1e-6


def test_mann_whitney_all_equal_is_no_evidence_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert mann_whitney([1.0] * 40, [1.0] * 25) == (500.0, 1.0, 0.5)
    with pytest.raises(ValueError, match="at least one"):
        mann_whitney([], [1.0])
