"""The canary ramp, simulated as the benchmark walks it: it says yes at 400 sessions an hour
and keeps the confidence sequence's guarantee however its steps move."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from benchmarks.gates import CONFIG, NI, SUP, Row, simulate

RUNS = 400


def most_by_chance(runs: int, rate: float) -> int:
    """Promotions a procedure honest at `rate` reaches by chance once in 1000."""
    return int(binom.ppf(0.999, runs, rate))


@settings(max_examples=6, deadline=None, derandomize=True)
@given(
    per_look=st.sampled_from([60, 200, 600]),
    question=st.sampled_from([SUP, NI]),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_a_change_at_the_margin_is_promoted_at_most_one_minus_confidence(
    per_look: int, question, seed: int
) -> None:
    """Steps that advance without an answer, a tenant that holds a pass, looks every 30
    minutes for 12 hours: none of it buys a promotion the question does not allow."""
    margin = 0.0 if question is SUP else -CONFIG.tolerance
    row = Row("at the margin", (margin,) * 3, question)
    promoted = simulate(row, per_look, "new", RUNS, seed).promoted
    assert promoted * RUNS <= most_by_chance(RUNS, 1 - CONFIG.confidence)


def test_at_400_sessions_an_hour_the_default_budget_answers_a_fix_and_a_neutral_change() -> None:
    """The issue's questions at T = 200 sessions a 30-minute look (RESULTS.md has the
    table at 2000 canaries a cell)."""
    fix = simulate(Row("+0.10", (0.10,) * 3, SUP), 200, "new", RUNS, seed=1)
    neutral = simulate(Row("0", (0.0,) * 3, NI), 200, "new", RUNS, seed=2)
    assert fix.promoted >= 0.8 and neutral.promoted >= 0.6
    for row in (
        Row("-0.10", (-0.10,) * 3, NI),
        Row("-0.10", (-0.10,) * 3, SUP),
        Row("-0.05", (-0.05,) * 3, SUP),
    ):
        harmful = simulate(row, 200, "new", RUNS, seed=3)
        assert harmful.promoted * RUNS <= most_by_chance(RUNS, 0.05)
    old = simulate(Row("+0.10", (0.10,) * 3, SUP), 200, "old", RUNS, seed=1)
    assert old.promoted < 0.5  # the canary before the ramp threw most such fixes away


@settings(max_examples=6, deadline=None, derandomize=True)
@given(
    per_look=st.sampled_from([60, 200, 600]),
    question=st.sampled_from([SUP, NI]),
    others=st.sampled_from([0.0, 0.10, 0.20]),
    harmed=st.integers(min_value=0, max_value=2),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_a_tenant_harmed_by_its_tolerance_is_promoted_at_most_one_minus_confidence(
    per_look: int, question, others: float, harmed: int, seed: int
) -> None:
    """One tenant loses exactly `tenant_tolerance` while the other two gain enough to carry
    the question overall: the tenant's hold keeps it from promotion but by chance."""
    effects = [others] * 3
    effects[harmed] = -CONFIG.tenant_tolerance
    promoted = simulate(
        Row("one tenant harmed", tuple(effects), question), per_look, "new", RUNS, seed
    )
    assert promoted.promoted * RUNS <= most_by_chance(RUNS, 1 - CONFIG.confidence)
