"""The gate judge on known distributions: it passes equals, fails clear harm, waits for data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pydantic import ValidationError

from evolution.gates import (
    GateConfig,
    GateResult,
    MetricSamples,
    Question,
    ReplayCase,
    Sample,
    Verdict,
    judge,
    judge_replay,
    question_for,
)

CONFIG = GateConfig()


def rewards(rng: np.random.Generator, tenant: str, mean: float, n: int) -> list[Sample]:
    """Per-session rewards in [0, 1] around `mean`."""
    values = np.clip(rng.normal(mean, 0.15, n), 0.0, 1.0)
    return [
        Sample(tenant=tenant, value=float(v), key=f"{tenant}-{i}") for i, v in enumerate(values)
    ]


def errors(rng: np.random.Generator, tenant: str, rate: float, n: int) -> list[Sample]:
    """Per-session error flags (1 = the session hit an error)."""
    return [Sample(tenant=tenant, value=float(v)) for v in rng.random(n) < rate]


def reward_metric(
    baseline: dict[str, float], candidate: dict[str, float], n: int = 120, seed: int = 1
) -> MetricSamples:
    rng = np.random.default_rng(seed)
    return MetricSamples(
        name="reward",
        baseline=[s for tenant, mean in baseline.items() for s in rewards(rng, tenant, mean, n)],
        candidate=[s for tenant, mean in candidate.items() for s in rewards(rng, tenant, mean, n)],
    )


def error_metric(baseline_rate: float, candidate_rate: float, n: int = 200) -> MetricSamples:
    rng = np.random.default_rng(2)
    return MetricSamples(
        name="error_rate",
        baseline=errors(rng, "acme", baseline_rate, n),
        candidate=errors(rng, "acme", candidate_rate, n),
        higher_is_better=False,
    )


# --- live gates -----------------------------------------------------------------------------


def test_equal_distributions_pass_non_inferiority_and_say_what_they_asked() -> None:
    metric = reward_metric({"acme": 0.7, "globex": 0.6}, {"acme": 0.7, "globex": 0.6})
    result = judge("canary", [metric], CONFIG, step=1, weight=0.05)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.reason.startswith(
        "canary gate passed: reward shown no worse than 0.05 (non-inferiority) at 95% "
        "confidence over every look"
    )
    assert (result.step, result.weight) == (1, 0.05)
    assert result.question is Question.NON_INFERIORITY and result.sessions == 240
    (aggregate,) = result.metrics
    assert aggregate.question is Question.NON_INFERIORITY and aggregate.confidence == 0.95
    assert aggregate.delta_low > -0.05 and aggregate.delta_high > aggregate.delta
    assert result.sessions_needed == aggregate.sessions_needed > 0
    assert [j.tenant for j in result.tenants] == ["acme", "globex"]
    assert all(j.verdict is Verdict.PASS and j.judged for j in result.tenants)
    assert all(j.question is Question.NO_HARM for j in result.tenants)


def test_a_fix_must_show_a_gain_and_says_how_many_sessions_that_needs() -> None:
    metric = reward_metric({"acme": 0.7, "globex": 0.6}, {"acme": 0.7, "globex": 0.6})
    result = judge("canary", [metric], CONFIG, question=Question.SUPERIORITY)
    assert result.verdict is Verdict.MARGINAL, result.reason
    assert result.question is Question.SUPERIORITY
    needed = result.sessions_needed
    assert "not yet shown better (superiority; 95% interval of the gain" in result.reason
    assert result.reason.endswith(f"needs ~{needed} sessions a side to tell a 0.05 gain; has 240")
    better = judge(
        "canary",
        [reward_metric({"acme": 0.5}, {"acme": 0.8})],
        CONFIG,
        question=Question.SUPERIORITY,
    )
    assert better.verdict is Verdict.PASS and better.metrics[0].delta_low > 0
    assert "reward shown better (superiority)" in better.reason


def test_the_question_follows_the_action_unless_the_settings_name_one() -> None:
    assert [question_for(a) for a in ("memory", "harness", "tool_schema", "weights")] == [
        Question.SUPERIORITY
    ] * 4
    assert question_for(None) is Question.NON_INFERIORITY
    metric = reward_metric({"acme": 0.7}, {"acme": 0.7}, n=400)
    cost_cut = GateConfig(question=Question.NON_INFERIORITY)
    assert judge("canary", [metric], cost_cut, question=Question.SUPERIORITY).verdict is (
        Verdict.PASS
    )


def test_an_interval_straddling_the_margin_is_marginal_however_good_the_mean_looks() -> None:
    """The old judge passed any observed drop within tolerance, however few sessions."""
    metric = MetricSamples(
        name="reward",
        baseline=[Sample(tenant="acme", value=v) for v in [1.0] * 24 + [0.0] * 6],
        candidate=[Sample(tenant="acme", value=v) for v in [1.0] * 24 + [0.0] * 6],
    )
    result = judge("canary", [metric], CONFIG)
    assert result.metrics[0].delta == 0.0
    assert result.verdict is Verdict.MARGINAL
    assert "not yet shown no worse than 0.05" in result.reason
    assert f"needs ~{result.sessions_needed} sessions a side to tell a 0.05 drop; has 30" in (
        result.reason
    )
    assert result.sessions_needed > 30


def test_a_covariate_from_before_the_gate_narrows_the_interval_and_the_plan() -> None:
    """Tenants that differ a lot: their success before the gate explains much of a reward."""
    rng = np.random.default_rng(4)
    levels = {"acme": 0.15, "globex": 0.5, "initech": 0.85}

    def side(covariate: bool) -> list[Sample]:
        return [
            Sample(tenant=t, value=float(v), covariate=level if covariate else None)
            for t, level in levels.items()
            for v in np.clip(rng.normal(level, 0.1, 200), 0.0, 1.0)
        ]

    rng = np.random.default_rng(4)
    plain = MetricSamples(name="reward", baseline=side(False), candidate=side(False))
    rng = np.random.default_rng(4)
    adjusted = MetricSamples(name="reward", baseline=side(True), candidate=side(True))
    without, with_ = (judge("canary", [m], CONFIG).metrics[0] for m in (plain, adjusted))
    assert without.variance_reduction is None and with_.variance_reduction > 0.5
    assert with_.delta == pytest.approx(without.delta, abs=0.01)
    assert with_.delta_high - with_.delta_low < (without.delta_high - without.delta_low) / 2
    assert with_.sessions_needed < without.sessions_needed / 2


def test_a_clearly_worse_candidate_fails() -> None:
    metric = reward_metric({"acme": 0.7}, {"acme": 0.5})
    for question in Question.SUPERIORITY, Question.NON_INFERIORITY:
        result = judge("canary", [metric], CONFIG, question=question)
        assert result.verdict is Verdict.FAIL
        assert result.reason.startswith("canary gate failed: metric reward is worse by 0.")
        assert "more judgement" not in result.reason  # its one tenant says the same again
        (aggregate,) = result.metrics
        assert aggregate.delta == pytest.approx(-0.2, abs=0.05)
        assert aggregate.delta_high < -0.05 and aggregate.effect < 0.25
    assert "confidently worse than tolerance 0.05 (non-inferiority" in result.reason


def test_a_clearly_better_candidate_passes() -> None:
    """A significant difference towards the candidate is no reason to stop it."""
    result = judge("canary", [reward_metric({"acme": 0.5}, {"acme": 0.8})], CONFIG)
    assert result.verdict is Verdict.PASS
    assert result.metrics[0].effect > 0.9


def test_the_mean_decides_the_direction_even_when_ranks_favour_the_candidate() -> None:
    """Most sessions slightly better, a quarter ruined: the expected reward is what users get."""
    metric = MetricSamples(
        name="reward",
        baseline=[Sample(tenant="acme", value=0.6)] * 100,
        candidate=[Sample(tenant="acme", value=0.7)] * 75 + [Sample(tenant="acme", value=0.0)] * 25,
    )
    result = judge("canary", [metric], CONFIG)
    assert result.metrics[0].effect == 0.75
    assert result.verdict is not Verdict.PASS
    assert "worse by 0.075" in result.reason
    assert judge("canary", [metric], CONFIG, question=Question.SUPERIORITY).verdict is not (
        Verdict.PASS
    )


def test_too_few_samples_are_marginal() -> None:
    metric = reward_metric({"acme": 0.7}, {"acme": 0.7}, n=12)
    result = judge("shadow", [metric], CONFIG)
    assert result.verdict is Verdict.MARGINAL
    assert result.reason == (
        "shadow gate marginal: metric reward: too few samples to judge "
        "(12 baseline, 12 candidate; 30 needed on each side)"
    )


def test_worse_beyond_tolerance_but_not_confidently_is_marginal() -> None:
    metric = MetricSamples(
        name="reward",
        baseline=[Sample(tenant="acme", value=v) for v in [1.0] * 15 + [0.0] * 15],
        candidate=[Sample(tenant="acme", value=v) for v in [1.0] * 12 + [0.0] * 18],
    )
    result = judge("canary", [metric], CONFIG)
    assert result.verdict is Verdict.MARGINAL
    assert result.metrics[0].delta_low < -0.05 < result.metrics[0].delta_high
    assert "worse by 0.1, not yet shown no worse than 0.05" in result.reason


def test_a_failing_critical_metric_fails_the_gate_alone() -> None:
    too_few = MetricSamples(
        name="latency_s",
        baseline=[Sample(tenant="acme", value=1.0)] * 5,
        candidate=[Sample(tenant="acme", value=1.0)] * 5,
        higher_is_better=False,
    )
    metrics = [reward_metric({"acme": 0.7}, {"acme": 0.7}, n=400), error_metric(0.02, 0.3), too_few]
    result = judge("canary", metrics, CONFIG)
    assert result.verdict is Verdict.FAIL
    assert result.reason.startswith("canary gate failed: critical metric error_rate is worse by")
    verdicts = {j.metric: j.verdict for j in result.metrics}
    assert verdicts == {
        "reward": Verdict.PASS,
        "error_rate": Verdict.FAIL,
        "latency_s": Verdict.MARGINAL,
    }
    assert [j.critical for j in result.metrics] == [False, True, False]


def test_fewer_errors_is_not_a_failure() -> None:
    result = judge("canary", [error_metric(0.3, 0.02)], CONFIG)
    assert result.verdict is Verdict.PASS, result.reason


def test_a_candidate_that_hurts_one_tenant_fails_naming_it() -> None:
    baseline = {"acme": 0.6, "globex": 0.6, "initech": 0.6, "umbrella": 0.6}
    candidate = {"acme": 0.75, "globex": 0.75, "initech": 0.75, "umbrella": 0.3}
    result = judge("canary", [reward_metric(baseline, candidate, n=80)], CONFIG)
    (aggregate,) = result.metrics
    assert aggregate.verdict is Verdict.PASS and aggregate.delta > 0
    assert result.verdict is Verdict.FAIL
    assert result.reason.startswith("canary gate failed: metric reward for tenant umbrella is")
    by_tenant = {j.tenant: j.verdict for j in result.tenants}
    assert by_tenant == {
        "acme": Verdict.PASS,
        "globex": Verdict.PASS,
        "initech": Verdict.PASS,
        "umbrella": Verdict.FAIL,
    }


def test_a_tenant_that_may_be_hurt_holds_a_pass_until_shown_within_its_tolerance() -> None:
    """Two tenants gain enough to carry the question; the third drops by 0.08, its interval
    reaching below -tenant_tolerance: the gate waits (marginal), naming it, asked either
    question, and says what would rule the drop out."""
    baseline = {"acme": 0.6, "globex": 0.6, "initech": 0.6}
    candidate = {"acme": 0.8, "globex": 0.8, "initech": 0.52}
    for question in (Question.NON_INFERIORITY, Question.SUPERIORITY):
        result = judge(
            "canary", [reward_metric(baseline, candidate, n=60)], CONFIG, question=question
        )
        (aggregate,) = result.metrics
        assert aggregate.verdict is Verdict.PASS
        assert result.verdict is Verdict.MARGINAL
        initech = next(j for j in result.tenants if j.tenant == "initech")
        assert initech.verdict is Verdict.MARGINAL and initech.judged and initech.held
        assert initech.delta_low < -CONFIG.tenant_tolerance < initech.delta
        assert result.reason.startswith("canary gate marginal: metric reward for tenant initech")
        assert "not yet shown within tenant tolerance 0.1" in result.reason
        assert not any(j.held for j in result.tenants if j.tenant != "initech")
        # Answering it needs the tenant's own sessions, brought at its share (a third).
        assert initech.sessions_to_answer > initech.n_candidate
        assert result.sessions_to_answer >= 3 * initech.sessions_to_answer - 3
    # Unchanged for that tenant, with the sessions to show it: nothing holds.
    kept = {"acme": 0.8, "globex": 0.8, "initech": 0.6}
    assert judge("canary", [reward_metric(baseline, kept, n=200)], CONFIG).verdict is Verdict.PASS
    # Harmed beyond it by what it shows so far: more sessions would not rule it out.
    lost = {"acme": 0.8, "globex": 0.8, "initech": 0.47}
    held = judge("canary", [reward_metric(baseline, lost, n=30)], CONFIG)
    assert held.verdict is Verdict.MARGINAL and held.sessions_to_answer is None
    assert "more sessions would not rule it out" in held.reason


def test_a_tenant_too_noisy_to_tell_holds_a_pass_unless_tenants_only_stop_on_harm() -> None:
    """A dozen noisy sessions a side: the small tenant's interval spans -0.5 to +0.4, so a
    0.1 drop is not ruled out and it holds the pass; with `tenant_tolerance` None (traffic
    too thin to tell a tenant's drop) it holds nothing, and confident harm still fails."""
    metric = reward_metric({"acme": 0.6, "globex": 0.6}, {"acme": 0.8, "globex": 0.8}, n=100)
    tiny = [Sample(tenant="tiny", value=v) for v in (0.3, 0.9) * 6]
    hurt = [Sample(tenant="tiny", value=v) for v in (0.22, 0.82) * 6]
    noisy = metric.model_copy(
        update={"baseline": metric.baseline + tiny, "candidate": metric.candidate + hurt}
    )
    fix = judge("canary", [noisy], CONFIG, question=Question.SUPERIORITY)
    assert fix.verdict is Verdict.MARGINAL and "tenant tiny" in fix.reason, fix.reason
    unguarded = CONFIG.model_copy(update={"tenant_tolerance": None})
    for question in (Question.SUPERIORITY, Question.NON_INFERIORITY):
        assert judge("canary", [noisy], unguarded, question=question).verdict is Verdict.PASS
    broken = [Sample(tenant="tiny", value=0.0) for _ in range(12)]
    harmed = noisy.model_copy(update={"candidate": metric.candidate + broken})
    assert judge("canary", [harmed], unguarded).verdict is Verdict.FAIL


def test_an_open_question_says_what_answering_it_would_take() -> None:
    """sessions_to_answer: the sessions a side that would answer the question if the change
    is what it looks like so far; none where it looks no better than the margin."""
    small_gain = judge(
        "canary",
        [reward_metric({"acme": 0.6}, {"acme": 0.64}, n=60)],
        CONFIG,
        question=Question.SUPERIORITY,
    )
    assert small_gain.verdict is Verdict.MARGINAL
    assert small_gain.sessions_to_answer > small_gain.sessions
    larger = judge(
        "canary",
        [reward_metric({"acme": 0.6}, {"acme": 0.7}, n=60)],
        CONFIG,
        question=Question.SUPERIORITY,
    )
    assert larger.sessions_to_answer < small_gain.sessions_to_answer
    worse = judge(
        "canary",
        [reward_metric({"acme": 0.6}, {"acme": 0.58}, n=60)],
        CONFIG,
        question=Question.SUPERIORITY,
    )
    assert worse.sessions_to_answer is None


def test_a_tenant_with_few_samples_is_reported_not_judged() -> None:
    metric = reward_metric({"acme": 0.7}, {"acme": 0.7}, n=400)
    rng = np.random.default_rng(3)
    small = metric.model_copy(
        update={
            "baseline": metric.baseline + rewards(rng, "tiny", 0.9, 4),
            "candidate": metric.candidate + rewards(rng, "tiny", 0.1, 4),
        }
    )
    result = judge("canary", [small], CONFIG)
    assert result.verdict is Verdict.PASS, result.reason
    tiny = next(j for j in result.tenants if j.tenant == "tiny")
    assert not tiny.judged and tiny.verdict is Verdict.MARGINAL
    assert tiny.reason == (
        "metric reward for tenant tiny: not judged, too few samples "
        "(4 baseline, 4 candidate; 10 needed on each side)"
    )


def test_nothing_to_judge_is_marginal_and_names_must_be_unique() -> None:
    assert judge("shadow", [], CONFIG).verdict is Verdict.MARGINAL
    metric = reward_metric({"acme": 0.7}, {"acme": 0.7}, n=5)
    with pytest.raises(ValueError, match="unique"):
        judge("shadow", [metric, metric], CONFIG)


def test_gate_config_validates_and_results_round_trip_as_json() -> None:
    assert CONFIG.step_weights == [0.05, 0.25, 0.5] and CONFIG.method == "mann_whitney"
    assert (CONFIG.budget_seconds, CONFIG.when_inconclusive) == (12 * 3600, "ask")
    # A budget shorter than one look a step still looks once at each step.
    assert GateConfig(canary_seconds=60).budget_seconds == 3 * CONFIG.step_seconds
    # None: a look a step and max_extensions more, as settings written before it had.
    old = GateConfig(step_weights=[0.5], step_seconds=10, max_extensions=3, canary_seconds=None)
    assert old.budget_seconds == 40
    for bad in (
        {"step_weights": [0.5, 0.25]},
        {"step_weights": [0.0, 0.5]},
        {"confidence": 0.5},
        {"tolerance": 0.0},
    ):
        with pytest.raises(ValidationError):
            GateConfig(**bad)
    with pytest.raises(ValidationError):
        GateConfig(extra_knob=1)
    result = judge("canary", [reward_metric({"acme": 0.7}, {"acme": 0.5})], CONFIG, step=2)
    assert GateResult.model_validate_json(result.model_dump_json()) == result


def test_a_skipped_gate_is_recorded_as_skipped_never_as_a_pass() -> None:
    skipped = GateResult.skipped_gate("shadow", "skipped by alice: urgent fix")
    assert (skipped.verdict, skipped.skipped, skipped.reason) == (
        Verdict.SKIPPED,
        True,
        "skipped by alice: urgent fix",
    )
    assert skipped.model_dump(mode="json")["verdict"] == "skipped"
    assert skipped.lets_through  # the evolution goes on past it, as past a pass
    # A record stored when a skipped gate said `pass` reads as skipped too.
    stored = {"gate": "canary", "verdict": "pass", "reason": "skipped by ana", "skipped": True}
    assert GateResult.model_validate(stored).verdict is Verdict.SKIPPED
    judged = {**stored, "skipped": False}
    assert GateResult.model_validate(judged).verdict is Verdict.PASS


@pytest.mark.parametrize(
    ("verdict", "through"),
    [(Verdict.PASS, True), (Verdict.MARGINAL, False), (Verdict.FAIL, False)],
)
def test_only_a_pass_or_a_skip_lets_an_evolution_through(verdict: Verdict, through: bool) -> None:
    assert GateResult(gate="replay", verdict=verdict, reason="judged").lets_through is through


def test_promotion_words_never_call_a_skipped_gate_passed() -> None:
    from activities.models import EvolutionOptions
    from workflows.evolution import _gates_words

    ana = EvolutionOptions(actor="ana", reason="hot-fix for the refund loop")
    judged = GateResult(gate="replay", verdict=Verdict.PASS, reason="replay gate passed")
    step = GateResult(gate="canary", step=1, verdict=Verdict.PASS, reason="canary gate passed")
    shadow = GateResult.skipped_gate("shadow", "skipped by ana")
    assert _gates_words([judged, step, step], ana) == "passed every gate"
    assert _gates_words([judged, shadow, step, step], ana) == (
        "passed replay and canary (shadow skipped by ana: hot-fix for the refund loop)"
    )
    everything = [GateResult.skipped_gate(g, "skipped") for g in ("replay", "shadow", "canary")]
    assert _gates_words(everything, ana) == (
        "went through no gate (replay, shadow and canary skipped by ana: hot-fix for the "
        "refund loop)"
    )


# --- replay gate ----------------------------------------------------------------------------


def replayed(
    prefix: str, success: bool, scores: list[tuple[float, float]], tenant: str = "acme"
) -> list[ReplayCase]:
    return [
        ReplayCase(
            trajectory_id=f"{prefix}{i}",
            tenant=tenant,
            recorded_success=success,
            baseline_score=baseline,
            candidate_score=candidate,
        )
        for i, (baseline, candidate) in enumerate(scores)
    ]


def test_replay_passes_when_failures_are_fixed_and_successes_kept() -> None:
    failures = replayed("f", False, [(0.0, 1.0)] * 9 + [(0.0, 0.0)] * 3)
    successes = replayed("s", True, [(1.0, 1.0)] * 12)
    result = judge_replay(failures + successes, CONFIG)
    assert result.verdict is Verdict.PASS, result.reason
    assert result.reason == (
        "replay gate passed: past failures improved by +0.75 on average (9 of 12 fixed), "
        "known successes held within tolerance 0.05 (0 of 12 broken)"
    )
    assert result.fixed == [f"f{i}" for i in range(9)] and result.broken == []


def test_replay_fails_when_known_successes_break_and_lists_them() -> None:
    failures = replayed("f", False, [(0.0, 1.0)] * 12)
    successes = replayed("s", True, [(1.0, 0.0)] * 5 + [(1.0, 1.0)] * 7)
    result = judge_replay(failures + successes, CONFIG)
    assert result.verdict is Verdict.FAIL
    assert result.reason.startswith("replay gate failed: known successes regressed by 0.417")
    assert result.reason.endswith("broken: s0, s1, s2, s3, s4")
    assert result.broken == ["s0", "s1", "s2", "s3", "s4"]


def test_replay_fails_when_past_failures_do_not_improve() -> None:
    failures = replayed("f", False, [(0.0, 0.0)] * 12)
    successes = replayed("s", True, [(1.0, 1.0)] * 12)
    result = judge_replay(failures + successes, CONFIG)
    assert result.verdict is Verdict.FAIL
    assert result.reason.startswith("replay gate failed: past failures did not improve enough")
    demanding = judge_replay(
        replayed("f", False, [(0.0, 0.2)] * 12) + successes, GateConfig(min_effect=0.3)
    )
    assert demanding.verdict is Verdict.FAIL
    assert "short of the 0.3 improvement needed" in demanding.reason


def test_replay_with_too_few_cases_is_marginal() -> None:
    cases = replayed("f", False, [(0.0, 1.0)] * 4) + replayed("s", True, [(1.0, 1.0)] * 20)
    result = judge_replay(cases, CONFIG)
    assert result.verdict is Verdict.MARGINAL
    assert result.reason == (
        "replay gate marginal: past failures: too few to judge (4 replayed; 10 needed)"
    )


def test_replay_fails_when_one_tenant_loses_its_successes() -> None:
    failures = replayed("f", False, [(0.0, 1.0)] * 12)
    kept = replayed("a", True, [(1.0, 1.0)] * 120, tenant="acme")
    hurt = replayed("g", True, [(1.0, 0.0)] * 6 + [(1.0, 1.0)] * 4, tenant="globex")
    result = judge_replay(failures + kept + hurt, CONFIG)
    assert [j.verdict for j in result.metrics] == [Verdict.PASS, Verdict.PASS]
    assert result.verdict is Verdict.FAIL
    assert result.reason.startswith("replay gate failed: known successes for tenant globex")
    assert result.broken == [f"g{i}" for i in range(6)]


def test_the_temporal_details_of_an_extension_say_the_question_interval_and_sessions() -> None:
    from workflows.evolution import _plan_words

    values = [1.0] * 24 + [0.0] * 6
    metric = MetricSamples(
        name="reward",
        baseline=[Sample(tenant="acme", value=v) for v in values],
        candidate=[Sample(tenant="acme", value=v) for v in values],
    )
    result = judge("canary", [metric], CONFIG, question=Question.SUPERIORITY)
    (primary,) = result.metrics
    assert _plan_words(result) == (
        f": superiority, +0 (95% interval {primary.delta_low:+.3g} to "
        f"{primary.delta_high:+.3g}), needs ~{result.sessions_needed} sessions a side; has 30"
    )
    assert _plan_words(GateResult.skipped_gate("canary", "skipped")) == ""


def test_an_extension_waits_as_long_as_the_traffic_so_far_takes_to_bring_the_plan() -> None:
    from workflows.evolution import _seconds_to_plan

    began = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    now = began + timedelta(minutes=30)
    result = GateResult(gate="canary", verdict=Verdict.MARGINAL, reason="marginal")
    assert _seconds_to_plan(result, began, now) is None  # nothing planned
    planned = result.model_copy(update={"sessions_needed": 200, "sessions": 50})
    # 50 sessions in 30 min: the other 150 take 90 min more at that pace.
    assert _seconds_to_plan(planned, began, now) == pytest.approx(90 * 60)
    reached = planned.model_copy(update={"sessions": 250})
    assert _seconds_to_plan(reached, began, now) == 0
    nobody = planned.model_copy(update={"sessions": 0})
    assert _seconds_to_plan(nobody, began, now) is None  # no pace to go by
