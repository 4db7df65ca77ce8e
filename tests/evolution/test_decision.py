"""The decision policy: each rule of thumb picks its action and says why, deterministically."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evolution.decision import (
    Action,
    DecisionRecord,
    PolicyConfig,
    decide,
    fall_back,
    fallbacks,
)
from evolution.gates import GateConfig, Question
from evolution.window import (
    CanaryDelta,
    Drift,
    FailureCluster,
    FailureKind,
    Mean,
    Rate,
    Regression,
    RegressionDesign,
    WindowSpec,
    WindowStats,
)

UNTIL = datetime(2026, 3, 2, tzinfo=UTC)
ORDER = [
    Action.MEMORY,
    Action.SKILL,
    Action.HARNESS,
    Action.TOOL_SCHEMA,
    Action.WEIGHTS,
    Action.ROLLBACK,
    Action.NOOP,
]


def rate(successes: int, total: int) -> Rate:
    """A proportion with its Wilson interval, as evolution.analysis reports it."""
    if total == 0:
        return Rate(successes=0, total=0, rate=None, low=0.0, high=1.0)
    p, z = successes / total, 1.96
    centre, denominator = p + z * z / (2 * total), 1 + z * z / total
    margin = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    return Rate(
        successes=successes,
        total=total,
        rate=p,
        low=(centre - margin) / denominator,
        high=(centre + margin) / denominator,
    )


def mean(value: float, n: int, half_width: float = 0.03) -> Mean:
    return Mean(n=n, mean=value, low=value - half_width, high=value + half_width)


def cluster(
    kind: FailureKind,
    key: str,
    *,
    trajectories: int,
    window: int = 400,
    tenants: int = 1,
    task_types: int = 1,
    tool_setups: int = 1,
    **fields,
) -> FailureCluster:
    return FailureCluster(
        kind=kind,
        key=key,
        count=trajectories,
        trajectories=trajectories,
        share=trajectories / window,
        tenants=[f"tenant-{i}" for i in range(tenants)],
        task_types=[f"task-{i}" for i in range(task_types)],
        tool_setups=[f"setup-{i}" for i in range(tool_setups)],
        example_event_ids=[uuid.UUID(int=1)],
        **fields,
    )


def window(*, trajectories: int = 400, successes: int | None = None, **overrides) -> WindowStats:
    """A healthy window (93% success, no clusters) unless overridden."""
    successes = round(0.93 * trajectories) if successes is None else successes
    fields = dict(
        spec=WindowSpec(agent="support-bot", last=trajectories or 1, until=UNTIL),
        since=UNTIL - timedelta(days=1),
        until=UNTIL,
        stable_version="v2",
        trajectories=trajectories,
        sessions=trajectories // 2,
        llm_calls=trajectories * 3,
        tool_calls=trajectories * 2,
        tenants=["tenant-0", "tenant-1", "tenant-2", "tenant-3"],
        task_types=["task-0", "task-1", "task-2"],
        tool_setups=["setup-0", "setup-1", "setup-2"],
        task_success=rate(successes, trajectories),
        reward=mean(0.8, trajectories),
        correction_rate=rate(trajectories // 20, trajectories * 3),
        tool_error_rate=rate(trajectories // 40, trajectories * 2),
        failures=[],
        cost_usd=trajectories * 0.01,
        cost_per_success=0.01 / 0.93,
        drift=Drift(divergence=0.02, previous_trajectories=trajectories),
        canary=None,
        regression=None,
    )
    return WindowStats(**(fields | overrides))


def score_of(record: DecisionRecord, action: Action) -> float:
    return next(score.score for score in record.scores if score.action is action)


MISSING_FACT = cluster(
    FailureKind.MISSING_FACT, "refund window for damaged goods", trajectories=60, window=400
)
BAD_FORMAT = cluster(
    FailureKind.TOOL_ARGUMENT,
    "lookup_order.order_id:bad_format",
    tool="lookup_order",
    parameter="order_id",
    error_class="bad_format",
    trajectories=72,
    tenants=2,
)
INSTRUCTION = cluster(FailureKind.INSTRUCTION, "answer in JSON", trajectories=64)
ROUTING = cluster(FailureKind.TOOL_ROUTING, "refund_request->lookup_order", trajectories=56)


def test_a_narrow_missing_fact_goes_to_memory() -> None:
    record = decide(window(failures=[MISSING_FACT]))
    assert record.action is Action.MEMORY
    assert "refund window for damaged goods" in record.reason
    assert "15%" in record.reason and "tenant-0" in record.reason
    assert record.target == MISSING_FACT


def test_tool_argument_format_errors_go_to_the_tool_schema() -> None:
    record = decide(window(failures=[BAD_FORMAT]))
    assert record.action is Action.TOOL_SCHEMA
    assert record.reason.startswith(
        "tool_schema: 18% of trajectories fail lookup_order.order_id with bad_format across "
        "2 tenants; a schema fix"
    )
    assert record.target == BAD_FORMAT


def test_instruction_failures_go_to_the_harness() -> None:
    record = decide(window(failures=[INSTRUCTION]))
    assert record.action is Action.HARNESS
    assert "break the instruction 'answer in JSON'" in record.reason
    assert "16%" in record.reason


def test_routing_failures_go_to_the_harness() -> None:
    record = decide(window(failures=[ROUTING]))
    assert record.action is Action.HARNESS
    assert "wrong tool (refund_request->lookup_order)" in record.reason
    # A tool description can help routing too, but less than the harness.
    assert score_of(record, Action.TOOL_SCHEMA) < score_of(record, Action.HARNESS)


@pytest.mark.parametrize("kind", list(FailureKind))
def test_the_same_failure_everywhere_goes_to_the_weights(kind: FailureKind) -> None:
    wide = cluster(kind, "refund flow", trajectories=120, tenants=4, task_types=3, tool_setups=3)
    record = decide(window(failures=[wide]))
    assert record.action is Action.WEIGHTS
    assert "across 4 tenants, 3 task types and 3 tool setups" in record.reason
    assert "will not generalise" in record.reason
    weights_gain = next(s.expected_gain for s in record.scores if s.action is Action.WEIGHTS)
    assert all(weights_gain > s.expected_gain for s in record.scores if s.action in ORDER[:3])


def test_one_tenant_short_of_the_threshold_keeps_the_narrow_fix() -> None:
    almost = cluster(
        FailureKind.MISSING_FACT,
        "refund flow",
        trajectories=120,
        tenants=2,
        task_types=3,
        tool_setups=3,
    )
    record = decide(window(failures=[almost]))
    assert record.action is Action.MEMORY
    weights = next(score for score in record.scores if score.action is Action.WEIGHTS)
    assert (
        weights.expected_gain == 0
        and "weights need 3 tenants, 3 task types and 2 tool setups" in weights.evidence
    )


def regression(current: float, parent: float, n: int = 200, half_width=0.03) -> Regression:
    return Regression(
        version_id="v2",
        parent_id="v1",
        promoted_at=UNTIL - timedelta(hours=6),
        current=mean(current, n, half_width),
        parent=mean(parent, n),
        delta=current - parent,
    )


def test_a_regression_after_a_promotion_rolls_back_even_with_a_cluster() -> None:
    # The cluster alone would be worth more than the 0.14 reward drop: rollback still wins.
    broken = BAD_FORMAT.model_copy(update={"trajectories": 160, "count": 160, "share": 0.4})
    record = decide(window(failures=[broken], regression=regression(0.66, 0.80)))
    assert record.action is Action.ROLLBACK
    assert "v2 earns 0.14 less reward than its parent v1" in record.reason
    assert "restore v1" in record.reason
    assert record.target is None
    tool_schema = next(s for s in record.scores if s.action is Action.TOOL_SCHEMA)
    assert tool_schema.expected_gain > 0.14
    assert score_of(record, Action.ROLLBACK) > tool_schema.score


@pytest.mark.parametrize(
    ("current", "n", "half_width", "why"),
    [
        (0.75, 200, 0.03, "within tolerance"),
        (0.66, 10, 0.03, "only 10 rewards"),
        # Drops 0.07, beyond tolerance, but its interval [0.62, 0.78] still reaches 0.77.
        (0.70, 200, 0.08, "noise"),
    ],
)
def test_a_small_noisy_or_thin_regression_does_not_roll_back(current, n, half_width, why) -> None:
    record = decide(window(regression=regression(current, 0.77, n=n, half_width=half_width)))
    assert record.action is Action.NOOP
    rollback = next(score for score in record.scores if score.action is Action.ROLLBACK)
    assert rollback.expected_gain == 0 and why in rollback.evidence
    # The person reading a noop after a promotion learns why it was not rolled back.
    assert "stable v2 vs its parent: " in record.reason and why in record.reason


def test_the_reason_says_whether_the_parent_was_held_back() -> None:
    held = regression(0.60, 0.80, n=60).model_copy(update={"design": RegressionDesign.HOLDBACK})
    record = decide(window(regression=held))
    assert record.action is Action.ROLLBACK
    assert "than its parent v1, held back, on the same traffic" in record.reason
    assert record.signals["regression_design"] == "holdback"

    thin = held.model_copy(update={"current": mean(0.60, 9, 0.2)})
    waiting = decide(window(regression=thin))
    assert waiting.action is Action.NOOP
    assert "stable v2 vs its parent (held back): only 9 rewards" in waiting.reason
    assert not record.holdback_answered and not waiting.holdback_answered


@pytest.mark.parametrize(
    ("current", "n", "design", "answered"),
    [
        (0.78, 60, RegressionDesign.HOLDBACK, True),  # within tolerance, enough rewards
        (0.78, 20, RegressionDesign.HOLDBACK, False),  # too few on one side
        (0.70, 60, RegressionDesign.HOLDBACK, False),  # beyond tolerance, even if noisy
        (0.78, 60, RegressionDesign.BEFORE_AFTER, False),  # nothing held back
    ],
)
def test_a_holdback_has_answered_only_with_enough_rewards_within_tolerance(
    current, n, design, answered
) -> None:
    compared = regression(current, 0.80, n=n, half_width=0.15).model_copy(update={"design": design})
    record = decide(window(regression=compared))
    assert record.action is not Action.ROLLBACK
    assert record.holdback_answered is answered


def test_a_confirmed_regression_rolls_back_even_in_a_thin_window() -> None:
    # The promotion's own reward samples are the evidence, not the window's trajectory count.
    record = decide(window(trajectories=20, regression=regression(0.60, 0.80, n=60)))
    assert record.action is Action.ROLLBACK and "restore v1" in record.reason


def test_a_canary_clearly_worse_than_stable_is_cleared() -> None:
    canary = CanaryDelta(
        stable_version="v2",
        canary_version="v3",
        weight=0.25,
        stable=mean(0.80, 300),
        canary=mean(0.62, 100),
        delta=-0.18,
    )
    record = decide(window(canary=canary))
    assert record.action is Action.ROLLBACK
    assert "canary v3 earns 0.18 less reward than stable v2" in record.reason
    assert "clear the canary" in record.reason


def test_a_healthy_window_changes_nothing() -> None:
    small = cluster(FailureKind.MISSING_FACT, "opening hours", trajectories=4)
    record = decide(window(failures=[small]))
    assert record.action is Action.NOOP
    assert "93%" in record.reason and "no failure cluster reaches 5" in record.reason
    assert record.target is None


def test_too_few_trajectories_changes_nothing() -> None:
    thin = cluster(FailureKind.MISSING_FACT, "refund window", trajectories=8, window=20)
    record = decide(window(trajectories=20, failures=[thin]))
    assert record.action is Action.NOOP
    assert "only 20 trajectories" in record.reason and "too little evidence" in record.reason
    assert all(score.expected_gain == 0 for score in record.scores)


def test_a_small_gain_does_not_clear_min_gain() -> None:
    rare = cluster(FailureKind.MISSING_FACT, "holiday hours", trajectories=12)
    assert decide(window(failures=[rare]), PolicyConfig(min_gain=0.0)).action is Action.MEMORY
    record = decide(window(failures=[rare]))
    assert record.action is Action.NOOP and "min_gain" in record.reason


def test_workload_drift_discounts_every_change() -> None:
    calm = decide(window(failures=[MISSING_FACT]))
    moving = decide(
        window(failures=[MISSING_FACT], drift=Drift(divergence=0.9, previous_trajectories=400))
    )
    assert score_of(moving, Action.MEMORY) < score_of(calm, Action.MEMORY)
    assert moving.action is Action.NOOP and "drift 0.90" in moving.reason


def test_a_drift_read_off_a_few_trajectories_discounts_nothing() -> None:
    """Three sessions before the window all of one task type read as a large drift; the
    policy needs `drift_min_trajectories` before it believes one."""
    calm = decide(window(failures=[MISSING_FACT], drift=None))
    few = Drift(divergence=0.9, previous_trajectories=3)
    noisy = decide(window(failures=[MISSING_FACT], drift=few))
    assert score_of(noisy, Action.MEMORY) == score_of(calm, Action.MEMORY)
    assert noisy.action is Action.MEMORY and "drift" not in noisy.reason
    assert (noisy.signals["drift"], noisy.signals["drift_previous_trajectories"]) == (0.9, 3)
    strict = decide(
        window(failures=[MISSING_FACT], drift=few), PolicyConfig(drift_min_trajectories=3)
    )
    assert strict.action is Action.NOOP and "drift 0.90" in strict.reason


def test_force_takes_the_forced_action_and_keeps_every_score() -> None:
    stats = window(failures=[MISSING_FACT])
    record = decide(stats, force=Action.WEIGHTS)
    assert record.action is Action.WEIGHTS and record.forced
    assert record.reason.startswith("forced by the operator: weights")
    assert "would have chosen memory" in record.reason
    assert record.scores == decide(stats).scores


def test_allowed_excluding_the_best_takes_the_next_best() -> None:
    stats = window(failures=[BAD_FORMAT])
    record = decide(stats, allowed=[Action.MEMORY, Action.HARNESS])
    assert record.action is Action.HARNESS
    assert "tool_schema would score higher" in record.reason
    assert record.target == BAD_FORMAT


def test_noop_is_always_allowed() -> None:
    record = decide(window(failures=[BAD_FORMAT]), allowed=[])
    assert record.action is Action.NOOP and "no change is allowed" in record.reason


def test_the_record_survives_json() -> None:
    record = decide(window(failures=[BAD_FORMAT], regression=regression(0.79, 0.80)))
    assert DecisionRecord.model_validate_json(record.model_dump_json()) == record
    assert record.signals["top_cluster_key"] == BAD_FORMAT.key
    assert record.signals["regression_delta"] == pytest.approx(-0.01)
    assert record.stable_version == "v2" and record.window.agent == "support-bot"


def test_the_same_window_gives_the_same_record() -> None:
    stats = window(failures=[MISSING_FACT, BAD_FORMAT, INSTRUCTION])
    assert decide(stats) == decide(WindowStats.model_validate_json(stats.model_dump_json()))


@st.composite
def clusters(draw, total: int) -> FailureCluster:
    trajectories = draw(st.integers(1, max(total, 1)))
    return FailureCluster(
        kind=draw(st.sampled_from(FailureKind)),
        key=draw(st.sampled_from(["a", "b", "c"])),
        count=trajectories,
        trajectories=trajectories,
        share=draw(st.floats(0.0, 1.0)),
        tenants=[f"t{i}" for i in range(draw(st.integers(0, 5)))],
        task_types=[f"k{i}" for i in range(draw(st.integers(0, 5)))],
        tool_setups=[f"s{i}" for i in range(draw(st.integers(0, 4)))],
        example_event_ids=[],
    )


@st.composite
def windows(draw) -> WindowStats:
    total = draw(st.integers(0, 2000))
    means = st.builds(mean, st.floats(0.0, 1.0), st.integers(0, 500), st.floats(0.0, 0.2))
    regressions = st.builds(
        lambda current, parent: Regression(
            version_id="v2",
            parent_id="v1",
            promoted_at=UNTIL,
            current=current,
            parent=parent,
            delta=current.mean - parent.mean,
        ),
        means,
        means,
    )
    canaries = st.builds(
        lambda stable, live, weight: CanaryDelta(
            stable_version="v2",
            canary_version="v3",
            weight=weight,
            stable=stable,
            canary=live,
            delta=live.mean - stable.mean,
        ),
        means,
        means,
        st.floats(0.0, 1.0),
    )
    return window(
        trajectories=total,
        successes=draw(st.integers(0, total)),
        failures=draw(st.lists(clusters(total), max_size=4)),
        drift=draw(
            st.none()
            | st.builds(
                Drift, divergence=st.floats(0.0, 1.0), previous_trajectories=st.integers(0, 500)
            )
        ),
        regression=draw(st.none() | regressions),
        canary=draw(st.none() | canaries),
    )


@given(windows(), st.none() | st.sets(st.sampled_from(Action)), st.none() | st.sampled_from(Action))
def test_any_window_gets_a_complete_consistent_decision(stats, allowed, force) -> None:
    record = decide(stats, allowed=allowed, force=force)
    assert [score.action for score in record.scores] == ORDER
    for score in record.scores:
        assert score.score == pytest.approx(score.expected_gain - score.cost - score.risk)
    assert record == decide(stats, allowed=allowed, force=force)
    if force is not None:
        assert record.action is force and record.forced
        assert fallbacks(record, PolicyConfig()) == []
        return
    permitted = set(ORDER) if allowed is None else set(allowed) | {Action.NOOP}
    assert record.action in permitted
    next_best = fallbacks(record, PolicyConfig())
    assert [s.score for s in next_best] == sorted((s.score for s in next_best), reverse=True)
    for score in next_best:
        assert score.action in permitted - {record.action, Action.ROLLBACK, Action.NOOP}
        assert score.score > 0 and score.expected_gain >= PolicyConfig().min_gain
        assert score.target is not None
    if record.action is not Action.NOOP:
        assert score_of(record, record.action) == max(
            score.score for score in record.scores if score.action in permitted
        )
        assert score_of(record, record.action) > 0
        assert record.scores[ORDER.index(record.action)].expected_gain >= PolicyConfig().min_gain


def test_a_forced_change_on_thin_evidence_still_names_its_target() -> None:
    thin = window(trajectories=12, failures=[BAD_FORMAT, MISSING_FACT])
    assert decide(thin).action is Action.NOOP  # too little evidence to choose a change
    forced = decide(thin, force=Action.TOOL_SCHEMA)
    assert forced.target == BAD_FORMAT  # the cluster a schema change fits
    assert decide(thin, force=Action.MEMORY).target == MISSING_FACT
    assert decide(thin, force=Action.NOOP).target is None


# -- falling back ----------------------------------------------------------------------


def test_every_score_keeps_the_cluster_it_was_aimed_at() -> None:
    record = decide(window(failures=[ROUTING, BAD_FORMAT]))
    targets = {score.action: score.target for score in record.scores}
    assert targets[Action.TOOL_SCHEMA] == BAD_FORMAT == record.target
    assert targets[Action.HARNESS] == ROUTING  # the harness fits routing failures better
    assert targets[Action.WEIGHTS] is None  # nothing wide enough to aim at
    assert targets[Action.ROLLBACK] is None and targets[Action.NOOP] is None


def test_fallbacks_are_the_next_best_changes_in_score_order() -> None:
    record = decide(window(failures=[MISSING_FACT, BAD_FORMAT, INSTRUCTION]))
    assert record.action is Action.TOOL_SCHEMA
    next_best = fallbacks(record, PolicyConfig())
    # Harness outscores memory by 0.0001: the order is the scores', not the preference's.
    assert [(s.action, s.target) for s in next_best] == [
        (Action.HARNESS, INSTRUCTION),
        (Action.MEMORY, MISSING_FACT),
    ]
    assert next_best[0].score > next_best[1].score


def test_a_change_below_min_gain_or_not_above_noop_is_no_fallback() -> None:
    record = decide(window(failures=[BAD_FORMAT]))
    scores = {score.action: score for score in record.scores}
    # Memory pays for itself (score > 0) but expects less than min_gain; weights lose to noop.
    assert scores[Action.MEMORY].score > 0
    assert scores[Action.MEMORY].expected_gain < PolicyConfig().min_gain
    assert scores[Action.WEIGHTS].score < 0
    assert [s.action for s in fallbacks(record, PolicyConfig())] == [Action.HARNESS]
    generous = PolicyConfig(min_gain=0.01)
    record = decide(window(failures=[BAD_FORMAT]), generous)
    assert [s.action for s in fallbacks(record, generous)] == [Action.HARNESS, Action.MEMORY]


def test_a_forced_decision_has_no_fallbacks() -> None:
    stats = window(failures=[MISSING_FACT, BAD_FORMAT, INSTRUCTION])
    forced = decide(stats, force=Action.TOOL_SCHEMA)
    assert forced.action is decide(stats).action  # the same choice, but a person made it
    assert fallbacks(forced, PolicyConfig()) == []


def test_an_action_not_allowed_is_no_fallback() -> None:
    stats = window(failures=[MISSING_FACT, BAD_FORMAT, INSTRUCTION])
    record = decide(stats, allowed=[Action.TOOL_SCHEMA, Action.MEMORY])
    assert record.allowed == [Action.MEMORY, Action.TOOL_SCHEMA, Action.NOOP]
    assert [s.action for s in fallbacks(record, PolicyConfig())] == [Action.MEMORY]


def test_a_rollback_or_a_noop_has_no_fallbacks() -> None:
    rollback = decide(window(failures=[BAD_FORMAT], regression=regression(0.60, 0.80)))
    assert rollback.action is Action.ROLLBACK
    assert fallbacks(rollback, PolicyConfig()) == []
    rare = cluster(FailureKind.TOOL_ARGUMENT, "lookup_order.order_id", trajectories=12)
    noop = decide(window(failures=[rare]), PolicyConfig(min_gain=0.03))
    assert noop.action is Action.NOOP
    assert fallbacks(noop, PolicyConfig(min_gain=0.0)) == []


def test_falling_back_re_aims_the_record_and_keeps_the_evidence() -> None:
    record = decide(window(failures=[ROUTING, BAD_FORMAT]))
    harness = fallbacks(record, PolicyConfig())[0]
    moved = fall_back(record, harness, "tool_schema had nothing to propose")
    assert (moved.action, moved.target) == (Action.HARNESS, ROUTING)
    assert moved.reason.startswith(
        "harness, the next-best change (tool_schema had nothing to propose): tool_routing "
        "'refund_request->lookup_order'"
    )
    assert moved.scores == record.scores and moved.signals == record.signals
    assert moved.window == record.window and not moved.forced


def test_a_record_stored_before_targets_and_allowed_were_kept_still_loads() -> None:
    record = decide(window(failures=[BAD_FORMAT]))
    stored = record.model_dump(mode="json", exclude={"allowed"})
    for score in stored["scores"]:
        del score["target"]
    old = DecisionRecord.model_validate(stored)
    assert old.allowed is None and all(score.target is None for score in old.scores)
    assert old.action is record.action and old.target == record.target


# -- a change its canary cannot answer at today's traffic ------------------------------


def traffic_window(hours: float) -> WindowStats:
    """The missing-fact window, its 400 rewards (variance 0.16, as binary rewards at 0.8)
    arriving over `hours`."""
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.975, 399)) * math.sqrt(0.16 / 400)
    return window(
        failures=[MISSING_FACT],
        since=UNTIL - timedelta(hours=hours),
        reward=Mean(n=400, mean=0.8, low=0.8 - half, high=0.8 + half),
    )


def memory_of(record: DecisionRecord):
    return next(score for score in record.scores if score.action is Action.MEMORY)


def test_a_change_its_canary_cannot_answer_in_time_costs_more_and_says_so() -> None:
    gate, policy = GateConfig(), PolicyConfig()
    plain = memory_of(decide(traffic_window(24)))  # decided without the gate: no plan
    assert plain.plan is None
    fast = memory_of(decide(traffic_window(1), gate=gate))  # 400 rewarded sessions an hour
    assert fast.plan.answerable and fast.plan.question is Question.SUPERIORITY
    assert fast.plan.distance == pytest.approx(plain.expected_gain, abs=1e-4)
    assert (fast.cost, fast.risk, fast.evidence) == (plain.cost, plain.risk, plain.evidence)
    slow_record = decide(traffic_window(24), gate=gate)  # 400 a day, about 17 an hour
    slow = memory_of(slow_record)
    assert not slow.plan.answerable and 0 < slow.plan.shortfall < 1
    assert slow.cost == pytest.approx(
        plain.cost + policy.unanswered_cost * slow.plan.shortfall, abs=1e-4
    )
    assert slow.risk == pytest.approx(
        plain.risk + policy.unanswered_risk * slow.plan.shortfall, abs=1e-4
    )
    assert "its canary: superiority: ~" in slow.evidence
    assert slow_record.action is Action.MEMORY  # still worth it, and the reason says the cost
    assert "more than the canary's 12 h budget" in slow_record.reason
    assert slow_record.signals["rewarded_per_hour"] == pytest.approx(400 / 24)
    assert slow_record.signals["reward_variance"] == pytest.approx(0.16, rel=1e-3)
    assert DecisionRecord.model_validate_json(slow_record.model_dump_json()) == slow_record


@settings(max_examples=30, deadline=None)
@given(hours=st.floats(min_value=0.05, max_value=2000), more=st.floats(min_value=1.0, max_value=50))
def test_what_an_unanswerable_canary_costs_is_bounded_and_shrinks_with_traffic(
    hours: float, more: float
) -> None:
    gate, policy = GateConfig(), PolicyConfig()
    plain = memory_of(decide(traffic_window(hours)))
    slower, faster = (
        memory_of(decide(traffic_window(h), gate=gate)) for h in (hours * more, hours)
    )
    for score in (slower, faster):
        extra = score.cost - plain.cost
        assert 0 <= extra <= policy.unanswered_cost + 1e-4
        assert (extra < 1e-4) == score.plan.answerable or score.plan.shortfall < 0.01
    assert faster.cost <= slower.cost + 1e-4 and faster.risk <= slower.risk + 1e-4
