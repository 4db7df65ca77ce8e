"""Confidence sequences keep their error rate however often a canary looks; plans are right."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from evolution.gates import Question
from evolution.gates.estimate import Moments, estimate
from evolution.gates.live import passes
from evolution.gates.sequential import (
    fixed_half_width,
    mixture_half_width,
    mixture_precision,
    sessions_needed,
)

TOLERANCE = 0.05


def promoted_at_the_margin(
    rng: np.random.Generator,
    *,
    success: float,
    looks: int,
    per_look: int,
    confidence: float,
    runs: int,
    sequential: bool = True,
) -> int:
    """Canaries of a candidate exactly `TOLERANCE` worse, looked at after every batch of
    fresh sessions, promoted as soon as one look shows non-inferiority: a false promotion."""
    base = (rng.random((runs, looks * per_look)) < success).astype(float)
    cand = (rng.random((runs, looks * per_look)) < success - TOLERANCE).astype(float)
    precision = mixture_precision(TOLERANCE, confidence, 0.8)
    promoted = np.zeros(runs, bool)
    for look in range(1, looks + 1):
        n = look * per_look
        sides = [Moments(n, v[:, :n].sum(1), v[:, :n].sum(1)) for v in (base, cand)]
        found = estimate(*sides)
        half = (
            mixture_half_width(found.information, precision, confidence)
            if sequential
            else fixed_half_width(found.information, confidence)
        )
        low = found.delta - half
        promoted |= passes(Question.NON_INFERIORITY, found.delta, low, TOLERANCE)
    return int(promoted.sum())


def most_by_chance(runs: int, confidence: float) -> int:
    """False promotions a procedure honest at 1 - confidence reaches by chance once in 1000."""
    return int(binom.ppf(0.999, runs, 1.0 - confidence))


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    success=st.sampled_from([0.3, 0.5, 0.8, 0.9]),
    looks=st.integers(min_value=2, max_value=20),
    per_look=st.sampled_from([20, 50, 100]),
    confidence=st.sampled_from([0.9, 0.95]),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_false_promotions_stay_under_one_minus_confidence_however_many_looks(
    success: float, looks: int, per_look: int, confidence: float, seed: int
) -> None:
    runs = 400
    rng = np.random.default_rng(seed)
    false = promoted_at_the_margin(
        rng,
        success=success,
        looks=looks,
        per_look=per_look,
        confidence=confidence,
        runs=runs,
    )
    assert false <= most_by_chance(runs, confidence)


def test_the_bound_catches_a_fixed_horizon_interval_looked_at_repeatedly() -> None:
    """The check above has teeth: the interval the sequence replaces fails it."""
    runs, confidence = 2000, 0.95
    rng = np.random.default_rng(11)
    kwargs = dict(success=0.5, looks=20, per_look=50, confidence=confidence, runs=runs)
    assert promoted_at_the_margin(rng, sequential=False, **kwargs) > most_by_chance(
        runs, confidence
    )
    assert promoted_at_the_margin(rng, **kwargs) <= most_by_chance(runs, confidence)


def test_sessions_needed_matches_the_textbook_cases() -> None:
    # Two means half a standard deviation apart, two-sided 5%, power 80%:
    # 2 (1.95996 + 0.84162)^2 / 0.5^2 = 62.8, so 63 a side (Cohen's table, by the t-test: 64).
    assert sessions_needed(1.0, 1.0, 0.5, 0.95, 0.8) == 63
    # Two proportions, 0.6 against 0.7 (Fleiss, no continuity correction):
    # (1.95996 + 0.84162)^2 (0.24 + 0.21) / 0.1^2 = 353.2, so 354 a side.
    assert sessions_needed(0.24, 0.21, 0.1, 0.95, 0.8) == 354
    with pytest.raises(ValueError, match="positive"):
        sessions_needed(1.0, 1.0, 0.0, 0.95, 0.8)


@settings(max_examples=25, deadline=None)
@given(
    variance=st.floats(min_value=0.01, max_value=4.0),
    distance=st.floats(min_value=0.01, max_value=0.5),
    confidence=st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_looking_at_every_step_costs_sessions_and_the_plan_is_the_smallest_that_works(
    variance: float, distance: float, confidence: float
) -> None:
    precision = mixture_precision(distance, confidence, 0.8)
    fixed = sessions_needed(variance, variance, distance, confidence, 0.8)
    sequential = sessions_needed(variance, variance, distance, confidence, 0.8, precision)
    assert sequential > fixed

    def bound(n: int) -> float:  # the interval's half width plus the power's shortfall
        info = n / (2 * variance)
        return float(mixture_half_width(info, precision, confidence)) + 0.8416 / np.sqrt(info)

    assert bound(sequential) <= distance + 1e-4
    assert sequential == 1 or bound(sequential - 1) > distance - 1e-4


def test_the_planned_sessions_give_the_planned_power() -> None:
    """A neutral change at the planned size shows non-inferiority about 80% of the time."""
    variance, confidence = 0.16, 0.95  # binary rewards at 0.8
    precision = mixture_precision(TOLERANCE, confidence, 0.8)
    n = sessions_needed(variance, variance, TOLERANCE, confidence, 0.8, precision)
    rng = np.random.default_rng(5)
    runs = 2000
    sides = [Moments(n, y, y) for y in rng.binomial(n, 0.8, size=(2, runs)).astype(float)]
    found = estimate(*sides)
    low = found.delta - mixture_half_width(found.information, precision, confidence)
    shown = passes(Question.NON_INFERIORITY, found.delta, low, TOLERANCE).mean()
    assert 0.76 <= shown <= 0.84


def test_cuped_keeps_the_estimate_and_takes_out_what_the_covariate_explains() -> None:
    rng = np.random.default_rng(3)
    level = rng.choice([0.2, 0.5, 0.9], size=(2, 3000))  # each session's tenant's success
    values = (rng.random((2, 3000)) < level + np.array([[0.0], [0.05]])).astype(float)
    sides = [Moments.of(values[i], level[i]) for i in (0, 1)]
    raw, adjusted = estimate(*sides), estimate(*sides, adjust=True)
    assert adjusted.delta == pytest.approx(0.05, abs=0.03)
    assert abs(adjusted.delta - raw.delta) < 0.02
    assert float(adjusted.variance_reduction) > 0.3
    assert adjusted.information > raw.information
