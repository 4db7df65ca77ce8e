"""The canary's moves after a look, and its plan before it starts."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evolution.gates import GateConfig, GateResult, Question, Verdict
from evolution.gates.canary import Move, canary_move, harm_checked
from evolution.gates.plan import plan_canary
from evolution.gates.sequential import mixture_precision, sessions_needed

VERDICTS = (Verdict.PASS, Verdict.MARGINAL, Verdict.FAIL)


@pytest.mark.parametrize(
    ("verdict", "checked", "last", "spent"),
    list(itertools.product(VERDICTS, (False, True), (False, True), (False, True))),
)
def test_every_look_moves_as_the_ramp_says(verdict, checked, last, spent) -> None:
    move = canary_move(verdict, checked=checked, last_step=last, spent=spent)
    if verdict is Verdict.FAIL:
        expected = Move.STOP  # harm stops the canary at any step, budget or not
    elif last and verdict is Verdict.PASS:
        expected = Move.PROMOTE  # only the last step's answer promotes
    elif spent:
        expected = Move.INCONCLUSIVE
    elif not last and checked:
        expected = Move.ADVANCE  # no harm on enough sessions: the question may stay open
    else:
        expected = Move.LOOK_AGAIN
    assert move is expected


def test_a_look_checked_harm_once_the_primary_metric_had_min_samples_a_side() -> None:
    config = GateConfig(min_samples=30)
    look = GateResult(gate="canary", verdict=Verdict.MARGINAL, reason="open")
    assert not harm_checked(look, config)  # judged nothing
    assert not harm_checked(look.model_copy(update={"sessions": 29}), config)
    assert harm_checked(look.model_copy(update={"sessions": 30}), config)


def answers_at(config: GateConfig, rate: float, variance: float, looks: int, wanted: float):
    """Whether look `looks` is on the last step and holds `wanted` information, walking the
    ramp independently of the plan: each step before the last until a look has
    `min_samples` a side (only the last step answers)."""
    per_look = rate * config.step_seconds / 3600.0
    last = len(config.step_weights) - 1
    base = cand = 0.0
    step = on = 0
    for _ in range(looks):
        on = step
        weight = config.step_weights[step]
        base, cand = base + per_look * (1 - weight), cand + per_look * weight
        if step < last and min(base, cand) >= config.min_samples:
            step += 1
    information = 1.0 / (variance / base + variance / cand) if base and cand else 0.0
    return on == last and information >= wanted * (1 - 1e-9)


@settings(max_examples=40, deadline=None)
@given(
    rate=st.floats(min_value=20, max_value=20_000),
    variance=st.floats(min_value=0.01, max_value=1.0),
    distance=st.floats(min_value=0.02, max_value=0.4),
    steps=st.sampled_from([[0.05, 0.25, 0.5], [0.5], [0.1, 0.3], [0.2, 0.5, 0.9]]),
)
def test_the_plan_is_the_first_look_that_holds_the_sessions_it_needs(
    rate, variance, distance, steps
) -> None:
    config = GateConfig(step_weights=steps)
    plan = plan_canary(
        config, Question.SUPERIORITY, variance=variance, rate_per_hour=rate, distance=distance
    )
    precision = mixture_precision(config.resolution, config.confidence, config.power)
    needed = sessions_needed(
        variance, variance, distance, config.confidence, config.power, precision
    )
    assert plan.sessions_needed == needed
    wanted = needed / (2 * variance)  # what `needed` sessions a side at an even split hold
    looks = round(plan.hours * 3600 / config.step_seconds)
    assert answers_at(config, rate, variance, looks, wanted)
    assert not answers_at(config, rate, variance, looks - 1, wanted)  # the first that does
    assert plan.answerable == (plan.hours <= config.budget_seconds / 3600)
    assert 0.0 <= plan.shortfall < 1.0


@settings(max_examples=25, deadline=None)
@given(
    rate=st.floats(min_value=20, max_value=5000),
    more=st.floats(min_value=1.1, max_value=10),
    question=st.sampled_from([Question.SUPERIORITY, Question.NON_INFERIORITY]),
)
def test_more_traffic_never_makes_the_plan_longer(rate, more, question) -> None:
    config = GateConfig()
    slow, fast = (
        plan_canary(config, question, variance=0.16, rate_per_hour=r, distance=0.1)
        for r in (rate, rate * more)
    )
    assert fast.hours <= slow.hours
    assert fast.shortfall <= slow.shortfall


def test_no_traffic_never_answers_and_a_short_budget_says_how_short() -> None:
    config = GateConfig()
    none = plan_canary(config, Question.NON_INFERIORITY, variance=0.16, rate_per_hour=0.0)
    assert (none.hours, none.answerable, none.shortfall) == (None, False, 1.0)
    assert "never bring: it cannot be answered" in none.words()
    # Binary rewards at 0.8, a neutral change at 50 rewarded sessions an hour: about eight
    # times the 12-hour budget.
    slow = plan_canary(config, Question.NON_INFERIORITY, variance=0.16, rate_per_hour=50.0)
    assert not slow.answerable and slow.shortfall == pytest.approx(1 - 12 / slow.hours)
    assert slow.words().endswith("more than the canary's 12 h budget")
    fast = plan_canary(config, Question.NON_INFERIORITY, variance=0.16, rate_per_hour=2000.0)
    assert fast.answerable and fast.shortfall == 0.0 and "(budget 12 h)" in fast.words()
