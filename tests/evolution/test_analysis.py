"""Window statistics from a real registry, on SQLite and PostgreSQL: concrete numbers for
each signal, and properties where they are natural."""

from __future__ import annotations

import itertools
import math
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from activities.evidence import read_window
from atdp import OutcomeStatus, Traffic, utcnow
from evolution.analysis import (
    error_class_name,
    jensen_shannon,
    measure_window,
    tool_setup,
)
from evolution.memory.topic import topic
from evolution.stats import mean_interval, wilson_interval
from evolution.window import FailureKind, RegressionDesign, WindowSpec
from registry import Alias, NotFoundError, list_agents, set_alias, transaction
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    feedback,
    implicit_correction,
    new_version,
    score,
    store,
    task_success,
    trajectory,
    world,
)

HOUR = timedelta(hours=1)
MINUTE = timedelta(minutes=1)
SECOND = timedelta(seconds=1)


def analyse(engine, **spec):
    with transaction(engine) as session:
        return measure_window(read_window(session, WindowSpec(agent=AGENT, **spec)))


def cluster(stats, kind: FailureKind, key: str):
    found = [c for c in stats.failures if c.kind is kind and c.key == key]
    assert found, f"no {kind} cluster {key!r} in {[(c.kind, c.key) for c in stats.failures]}"
    return found[0]


def test_counts_success_reward_and_cost(engine) -> None:
    v1 = world(engine)
    base = utcnow()
    rec = Recorder()
    t1 = trajectory(
        "acme",
        base - 90 * MINUTE,
        task_type="billing",
        version=v1,
        status=OutcomeStatus.SUCCESS,
        session="shared",
    )
    t2 = trajectory("globex", base - 80 * MINUTE, task_type="billing", status=OutcomeStatus.FAILURE)
    t3 = trajectory("acme", base - 70 * MINUTE, task_type="shipping")
    t4 = trajectory("initech", base - 60 * MINUTE, status=OutcomeStatus.SUCCESS)
    t5 = trajectory("acme", base - 50 * MINUTE, task_type="billing", session="shared")
    old = trajectory("acme", base - 3 * HOUR, task_type="billing", status=OutcomeStatus.SUCCESS)
    late = trajectory("acme", base, status=OutcomeStatus.SUCCESS)  # `until` is exclusive
    rec.llm_call(t1, tools=["lookup", "refund"], cost=0.01)
    rec.llm_call(t1, tools=["refund", "lookup"], cost=0.01)
    rec.llm_call(t2, tools=["refund", "lookup"], cost=0.02)
    rec.llm_call(t3, cost=0.03)
    rec.llm_call(old, cost=5.0)
    rewards = [
        score(t1, 1.0),
        score(t2, 0.0),
        task_success(t3, True),
        task_success(t4, False),  # the judgement outweighs the reported status
        score(old, 0.0),
    ]
    store(engine, [t1, t2, t3, t4, t5, old, late], rec.events, rewards)

    stats = analyse(engine, since=base - 2 * HOUR, until=base)

    assert (stats.trajectories, stats.sessions, stats.llm_calls, stats.tool_calls) == (5, 4, 4, 0)
    assert stats.tenants == ["acme", "globex", "initech"]
    assert stats.task_types == ["billing", "shipping", "unknown"]
    assert stats.tool_setups == sorted([tool_setup(["lookup", "refund"]), "none"])
    assert (stats.task_success.successes, stats.task_success.total) == (2, 4)
    assert stats.task_success.rate == 0.5
    assert (stats.task_success.low, stats.task_success.high) == wilson_interval(2, 4)
    assert stats.reward.n == 4
    assert (stats.reward.mean, stats.reward.low, stats.reward.high) == mean_interval([1, 0, 1, 0])
    assert stats.cost_usd == pytest.approx(0.07)
    assert stats.cost_per_success == pytest.approx(0.035)
    assert stats.correction_rate.total == 4 and stats.correction_rate.successes == 0
    assert stats.tool_error_rate.rate is None and stats.failures == []
    assert stats.stable_version == v1
    assert stats.canary is None and stats.regression is None
    assert (stats.since, stats.until) == (base - 2 * HOUR, base)

    with transaction(engine) as session, pytest.raises(NotFoundError):
        measure_window(read_window(session, WindowSpec(agent="no-such-agent", last=10)))


def test_corrections_and_missing_facts(engine) -> None:
    world(engine)
    base = utcnow()
    rec = Recorder()
    a1 = trajectory("acme", base - 30 * MINUTE, task_type="refunds")
    a2 = trajectory("globex", base - 20 * MINUTE, task_type="refunds")
    a3 = trajectory("acme", base - 10 * MINUTE, task_type="refunds")
    l1 = rec.llm_call(a1)
    fix1 = rec.user_message(a1, "No, the refund window is 30 days, not 14.", parent=l1)
    rec.llm_call(a1)
    l3 = rec.llm_call(a2)
    fix2 = rec.user_message(a2, "Actually the refund window is 30 days for EU orders", parent=l3)
    l4 = rec.llm_call(a2)
    l5 = rec.llm_call(a3)
    l6 = rec.llm_call(a3)
    rewards = [
        implicit_correction(a1, l1),
        implicit_correction(a2, l3),
        implicit_correction(a2, l4, regenerate=True),
        *feedback(a3, l6, category="missing_fact", critique="The refund window is 30 days"),
        *feedback(a3, l5, correction="The warehouse closes at 6pm on Fridays"),
    ]
    store(engine, [a1, a2, a3], rec.events, rewards)

    stats = analyse(engine, since=base - HOUR, until=base)

    # l1, l3 (next turn corrects), l4 (regenerated), l5 (explicit correction) of 6 calls.
    assert (stats.correction_rate.successes, stats.correction_rate.total) == (4, 6)
    assert stats.correction_rate.low <= 4 / 6 <= stats.correction_rate.high
    refund = stats.failures[0]
    assert (refund.kind, refund.key) == (FailureKind.MISSING_FACT, "days refund window")
    assert (refund.count, refund.trajectories, refund.share) == (3, 3, 1.0)
    assert refund.tenants == ["acme", "globex"] and refund.task_types == ["refunds"]
    assert set(refund.example_event_ids) == {fix1.id, fix2.id, l6.id}
    # Examples are the users' words as stored: the gateway redacts feedback text too.
    assert refund.examples == [
        "No, the refund window is 30 days, not 14.",
        "Actually the refund window is 30 days for EU orders",
        "The refund window is 30 days",
    ]
    warehouse = cluster(stats, FailureKind.MISSING_FACT, "closes fridays warehouse")
    assert (warehouse.count, warehouse.example_event_ids) == (1, [l5.id])
    assert len(stats.failures) == 2


def test_tool_failures_cluster_by_tool_parameter_and_error(engine) -> None:
    world(engine)
    base = utcnow()
    rec = Recorder()
    b1 = trajectory("acme", base - 30 * MINUTE, task_type="orders")
    b2 = trajectory("globex", base - 20 * MINUTE, task_type="orders")
    b3 = trajectory("initech", base - 10 * MINUTE, task_type="returns")
    rec.llm_call(b1, tools=["lookup_order", "refund"])
    # The gateway records the tool result; the agent reports the same call (same id).
    rec.tool_call(
        b1,
        "lookup_order",
        arguments={"order_id": 42},
        error_class="validation_error",
        returned={"error": "order_id: must be a string"},
        call_id="c1",
    )
    reported = rec.tool_call(
        b1,
        "lookup_order",
        arguments={"order_id": 42},
        error_class="ValidationError",
        message="order_id: must be a string",
        call_id="c1",
    )
    rec.tool_call(b1, "refund", error_class="timeout", message="upstream timed out " * 20)
    rec.tool_call(b1, "lookup_order", arguments={"order_id": "A-1"})
    rec.llm_call(b2, tools=["lookup_order"])
    second = rec.tool_call(
        b2,
        "lookup_order",
        arguments={"order_id": 7},
        error_class="validation_error",
        returned={"detail": [{"loc": ["body", "order_id"], "msg": "str type expected"}]},
    )
    rec.tool_call(b2, "cancel_everything", error_class="unknown_tool")
    rec.tool_call(b2, "refund", returned={"ok": True})
    rec.llm_call(b3, tools=["refund", "lookup_order"])
    third = rec.tool_call(
        b3, "lookup_order", error_class="validation_error", message="missing parameter 'order_id'"
    )
    generic = rec.tool_call(
        b3,
        "lookup_order",
        arguments={"order_id": "A-1"},
        error_class="tool_error",
        returned="Error: invalid order_id format",
    )
    answer = rec.llm_call(b2)
    rewards = [
        *feedback(b2, answer, thumbs="down", category="wrong_tool", critique="use lookup"),
        *feedback(b1, None, thumbs="down", category="format"),
        *feedback(b3, None, thumbs="down", critique="The answer ignored my question"),
        *feedback(b2, None, thumbs="up", critique="great answer"),
    ]
    store(engine, [b1, b2, b3], rec.events, rewards)

    stats = analyse(engine, since=base - HOUR, until=base)

    assert stats.tool_calls == 8  # the call recorded twice counts once
    assert (stats.tool_error_rate.successes, stats.tool_error_rate.total) == (6, 8)
    top = stats.failures[0]
    assert top.kind is FailureKind.TOOL_ARGUMENT
    assert (top.key, top.tool, top.parameter, top.error_class) == (
        "lookup_order.order_id:validation_error",
        "lookup_order",
        "order_id",
        "validation_error",
    )
    assert (top.count, top.trajectories, top.share) == (3, 3, 1.0)
    assert top.tenants == ["acme", "globex", "initech"]
    assert top.task_types == ["orders", "returns"]
    assert top.tool_setups == sorted(
        {tool_setup(["lookup_order", "refund"]), tool_setup(["lookup_order"])}
    )
    # The report with the error message stands for the call recorded twice.
    assert top.example_event_ids == [reported.id, second.id, third.id]
    assert top.examples == [
        "order_id: must be a string",
        '{"detail": [{"loc": ["body", "order_id"], "msg": "str type expected"}]}',
        "missing parameter 'order_id'",
    ]

    # A generic error class ("tool_error") is read by its message.
    generic_cluster = cluster(stats, FailureKind.TOOL_ARGUMENT, "lookup_order.order_id:tool_error")
    assert generic_cluster.example_event_ids == [generic.id]
    assert generic_cluster.examples == ["Error: invalid order_id format"]
    routing = cluster(stats, FailureKind.TOOL_ROUTING, "cancel_everything:unknown_tool")
    assert (routing.tool, routing.parameter, routing.tenants) == (
        "cancel_everything",
        None,
        ["globex"],
    )
    # A category with words is a correction, named by its words; the category kinds it.
    wrong_tool = cluster(stats, FailureKind.TOOL_ROUTING, "lookup use")
    assert wrong_tool.example_event_ids == [answer.id]
    assert cluster(stats, FailureKind.INSTRUCTION, "format").count == 1
    timeout = cluster(stats, FailureKind.TASK, "refund:timeout")
    assert timeout.count == 1 and len(timeout.examples[0]) == 200  # examples are kept short
    assert cluster(stats, FailureKind.TASK, "ignored question").tenants == ["initech"]
    # One report is one failure: thumbs-down plus a category is not also a TASK failure.
    assert len(stats.failures) == 7
    counts = [c.count for c in stats.failures]
    assert counts == sorted(counts, reverse=True)


def test_count_windows_time_windows_and_drift(engine) -> None:
    world(engine)
    base = utcnow()
    minutes = {
        "billing": [-90, -80, -50, -40],
        "shipping": [-70, -30],
        "returns": [10, 20, 30],
    }
    store(
        engine,
        [
            trajectory("acme", base + m * MINUTE, task_type=task)
            for task, at in minutes.items()
            for m in at
        ],
    )

    steady = analyse(engine, since=base - HOUR, until=base)
    assert steady.trajectories == 3 and steady.drift is not None
    assert steady.drift.divergence == pytest.approx(0.0, abs=1e-12)
    assert steady.drift.previous_trajectories == 3 and steady.drift.grown == []

    shifted = analyse(engine, since=base, until=base + HOUR)
    assert shifted.drift.divergence == pytest.approx(1.0)
    assert shifted.drift.grown == ["returns"]

    newest = analyse(engine, last=3, until=base + HOUR)
    assert newest.trajectories == 3 and newest.task_types == ["returns"]
    assert newest.since == base + 10 * MINUTE
    assert newest.drift.divergence == pytest.approx(1.0)
    assert newest.drift.previous_trajectories == 3

    four = analyse(engine, last=4, until=base + HOUR)
    assert four.task_types == ["returns", "shipping"] and four.since == base - 30 * MINUTE
    assert four.drift.previous_trajectories == 4
    assert 0.0 < four.drift.divergence < 1.0

    oldest = analyse(engine, last=3, until=base - 55 * MINUTE)
    assert oldest.trajectories == 3 and oldest.drift is None  # nothing came before

    bounded = analyse(engine, last=10, since=base - HOUR, until=base)
    assert bounded.trajectories == 3 and bounded.since == base - 50 * MINUTE


def test_tenant_and_version_filters_and_shadow_traffic(engine) -> None:
    v1 = world(engine)
    v2 = new_version(engine, "Be brief.")
    base = utcnow()
    rec = Recorder()
    mine = trajectory("acme", base - 40 * MINUTE, version=v1)
    theirs = trajectory("globex", base - 30 * MINUTE, version=v1)
    shadow = trajectory("acme", base - 20 * MINUTE, version=v2)
    newer = trajectory("acme", base - 10 * MINUTE, version=v2)
    rec.llm_call(mine, cost=0.5)
    rec.llm_call(theirs, cost=0.25)
    rec.tool_call(theirs, "lookup", error_class="validation_error", message="id: bad")
    rec.llm_call(shadow, cost=9.0, traffic=Traffic.SHADOW)
    rec.tool_call(shadow, "lookup", error_class="validation_error", message="id: bad")
    rewards = [score(mine, 1.0), score(theirs, 0.0), score(shadow, 0.2), score(newer, 0.5)]
    store(engine, [mine, theirs, shadow, newer], rec.events, rewards)

    everyone = analyse(engine, since=base - HOUR, until=base)
    assert everyone.trajectories == 3  # the shadow copy is not user traffic
    assert (everyone.llm_calls, everyone.cost_usd) == (2, 0.75)
    assert everyone.reward.mean == pytest.approx(0.5)
    assert [c.count for c in everyone.failures] == [1]

    acme = analyse(engine, since=base - HOUR, until=base, tenants=["acme"])
    assert (acme.trajectories, acme.tenants, acme.cost_usd) == (2, ["acme"], 0.5)
    assert acme.reward.mean == pytest.approx(0.75)
    assert acme.failures == [] and acme.tool_calls == 0

    served_by_v2 = analyse(engine, since=base - HOUR, until=base, version_id=v2)
    assert served_by_v2.trajectories == 1 and served_by_v2.reward.mean == 0.5

    nobody = analyse(engine, since=base - HOUR, until=base, tenants=["initech"])
    assert nobody.trajectories == 0 and nobody.reward.n == 0 and nobody.reward.mean is None
    assert nobody.task_success.rate is None
    assert (nobody.task_success.low, nobody.task_success.high) == (0.0, 1.0)
    assert nobody.drift is None and nobody.cost_per_success is None


def serve(engine, promoted, served: dict[str, list[tuple[int, float]]]) -> None:
    """Store one scored acme trajectory per (minutes from `promoted`, reward) of a version."""
    trajectories, rewards = [], []
    for version, points in served.items():
        for minutes, value in points:
            item = trajectory("acme", promoted + minutes * MINUTE, version=version)
            trajectories.append(item)
            rewards.append(score(item, value))
    store(engine, trajectories, rewards=rewards)


def test_canary_delta_and_regression_after_promotion(engine) -> None:
    v1 = world(engine)
    v2 = new_version(engine, "Cite the policy.")
    v3 = new_version(engine, "Cite the policy briefly.")
    promoted = utcnow() + MINUTE
    with transaction(engine) as session:
        set_alias(session, AGENT, Alias.STABLE, v2, actor="test", at=promoted)
        set_alias(
            session, AGENT, Alias.CANARY, v3, weight=0.2, actor="test", at=promoted + 30 * MINUTE
        )
    served = {
        v1: [(-180, 0.0), (-90, 0.9), (-60, 0.8), (-30, 0.7)],  # -180 is before the equal span
        v2: [(10, 0.3), (40, 0.5), (70, 0.4)],
        v3: [(50, 0.1), (80, 0.3)],
    }
    serve(engine, promoted, served)

    stats = analyse(engine, since=promoted, until=promoted + 2 * HOUR)

    assert stats.stable_version == v2
    canary = stats.canary
    assert (canary.stable_version, canary.canary_version, canary.weight) == (v2, v3, 0.2)
    assert canary.stable.mean == pytest.approx(0.4) and canary.canary.mean == pytest.approx(0.2)
    assert canary.delta == pytest.approx(-0.2) and canary.delta < 0
    regression = stats.regression
    assert (regression.version_id, regression.parent_id) == (v2, v1)
    assert regression.promoted_at == promoted
    assert (regression.current.n, regression.parent.n) == (3, 3)
    assert regression.current.mean == pytest.approx(0.4)
    assert regression.parent.mean == pytest.approx(0.8)
    assert regression.delta == pytest.approx(-0.4)

    before = analyse(engine, since=promoted - 2 * HOUR, until=promoted - MINUTE)
    assert before.stable_version == v1
    assert before.canary is None and before.regression is None


def test_a_held_back_parent_is_compared_on_the_same_traffic(engine) -> None:
    """Traffic that turns harder right after a promotion lowers both versions alike: the
    before/after comparison blames the promoted version, the holdback does not."""
    v1 = world(engine)
    v2 = new_version(engine, "Cite the policy.")
    promoted = utcnow() + MINUTE
    with transaction(engine) as session:
        set_alias(session, AGENT, Alias.STABLE, v2, actor="test", at=promoted)
        set_alias(
            session, AGENT, Alias.HOLDBACK, v1, weight=0.1, actor="test", at=promoted + SECOND
        )
    served = {
        v1: [(-90, 0.9), (-60, 0.9), (-30, 0.8), (20, 0.4), (50, 0.5)],  # harder after
        v2: [(10, 0.5), (40, 0.6), (70, 0.4)],
    }
    serve(engine, promoted, served)

    stats = analyse(engine, since=promoted, until=promoted + 2 * HOUR)
    regression = stats.regression

    # What an evolution of stable would change is stable's traffic: the held-back
    # sessions are left out of the window's own measures.
    assert (stats.trajectories, stats.reward.mean) == (3, pytest.approx(0.5))
    assert regression.design is RegressionDesign.HOLDBACK
    assert (regression.version_id, regression.parent_id) == (v2, v1)
    assert (regression.current.n, regression.parent.n) == (3, 2)
    assert regression.parent.mean == pytest.approx(0.45)
    assert regression.delta == pytest.approx(0.05)

    # Once the holdback ends (say, a person points it elsewhere), the comparison falls
    # back to before against after, and the same rewards read as a regression.
    with transaction(engine) as session:
        set_alias(session, AGENT, Alias.HOLDBACK, None, actor="test", at=promoted + HOUR)
    stats = analyse(engine, since=promoted, until=promoted + 2 * HOUR)
    after = stats.regression
    assert stats.trajectories == 5
    assert after.design is RegressionDesign.BEFORE_AFTER
    assert after.parent.mean == pytest.approx(2.6 / 3)  # the two hours before the promotion
    assert after.delta == pytest.approx(0.5 - 2.6 / 3)


_days = itertools.count(1)
outcomes = st.lists(
    st.tuples(
        st.sampled_from([None, *OutcomeStatus]),
        st.sampled_from([None, True, False]),
        st.one_of(st.none(), st.floats(0.0, 1.0)),
    ),
    max_size=8,
)


@settings(max_examples=8)
@given(outcomes)
def test_rates_and_means_stay_within_their_intervals(engine, cases) -> None:
    if not _has_world(engine):
        world(engine)
    # Each example gets a day of its own, so examples never share a window.
    base = utcnow() + next(_days) * timedelta(days=1)
    trajectories, rewards, expected = [], [], []
    for index, (status, judged, value) in enumerate(cases):
        item = trajectory("acme", base + index * MINUTE, status=status)
        trajectories.append(item)
        if judged is not None:
            rewards.append(task_success(item, judged))
        if value is not None:
            rewards.append(score(item, value))
        if judged is not None:
            expected.append(judged)
        elif status is OutcomeStatus.SUCCESS:
            expected.append(True)
        elif status in (OutcomeStatus.FAILURE, OutcomeStatus.ERROR, OutcomeStatus.ABANDONED):
            expected.append(False)
        elif value is not None:  # no outcome: the user's own score says how it went
            expected.append(value >= 0.5)
    store(engine, trajectories, rewards=rewards)

    stats = analyse(engine, since=base, until=base + HOUR)

    success = stats.task_success
    assert (success.successes, success.total) == (sum(expected), len(expected))
    if success.total:
        assert success.low <= success.rate <= success.high
    assert 0.0 <= success.low <= success.high <= 1.0
    if stats.reward.n:
        assert stats.reward.low <= stats.reward.mean <= stats.reward.high
        assert 0.0 <= stats.reward.mean <= 1.0


def _has_world(engine) -> bool:
    with transaction(engine) as session:
        return any(agent.name == AGENT for agent in list_agents(session))


mixes = st.dictionaries(st.sampled_from("abcdef"), st.integers(1, 50), min_size=1)


@given(mixes, mixes)
def test_jensen_shannon_is_symmetric_and_bounded(p, q) -> None:
    divergence = jensen_shannon(p, q)
    assert divergence == jensen_shannon(q, p)
    assert 0.0 <= divergence <= 1.0
    if set(p).isdisjoint(q):
        assert divergence == pytest.approx(1.0)


@given(mixes, st.integers(1, 7))
def test_jensen_shannon_ignores_scale(p, factor) -> None:
    scaled = {key: value * factor for key, value in p.items()}
    assert jensen_shannon(p, scaled) == pytest.approx(0.0, abs=1e-12)


@given(st.lists(st.sampled_from(["lookup", "refund", "cancel", "search"]), max_size=6))
def test_tool_setup_depends_only_on_the_set_of_names(names) -> None:
    assert tool_setup(names) == tool_setup(reversed(names)) == tool_setup(names + names)
    assert (tool_setup(names) == "none") == (not names)
    assert len(tool_setup(names)) in (4, 12)


def test_topics_and_error_classes_have_one_spelling() -> None:
    assert topic("No, the refund window is 30 days!") == topic("ACTUALLY, Refund window: 30 days")
    assert topic("no, no!") == "unspecified"
    assert error_class_name("ValidationError") == "validation_error"
    assert error_class_name("JSONDecodeError") == "json_decode_error"
    assert error_class_name("invalid-argument") == "invalid_argument"
    assert not math.isnan(jensen_shannon({"a": 1}, {"a": 2}))
