"""Evaluation sets in use: the replay gate's cases, required safety cases, the harness
optimiser's cases with their feedback, and the cases a promotion's fixed failures become."""

from __future__ import annotations

import uuid
from datetime import timedelta

from activities.operators import read_harness_cases
from atdp import MessageAction, utcnow
from evolution.evaluation import (
    fixed_failure_cases,
    replay_cases,
    required_safety_cases,
    with_required,
)
from evolution.harness.operator import HarnessCase, gepa_feedback
from evolution.safety import SafetyCase
from evolution.window import WindowSpec
from registry import (
    EvaluationCase,
    EvaluationSet,
    add_evaluation_cases,
    evaluation_set_events,
    transaction,
)
from tests.evolution.window_helpers import AGENT, Recorder, store, trajectory, world

MINUTE = timedelta(minutes=1)


def case(trajectory_id: uuid.UUID, status: str = "failing", **fields) -> EvaluationCase:
    return EvaluationCase(
        key=EvaluationCase.trajectory_key(trajectory_id),
        kind="trajectory",
        status=status,
        trajectory_id=trajectory_id,
        tenant=fields.pop("tenant", "acme"),
        **fields,
    )


def recorded(engine, count: int, at=None) -> list:
    """Trajectories of one answered llm call each, long ago (outside any recent window)."""
    world(engine)
    base = at or utcnow() - timedelta(days=30)
    rec, made = Recorder(), []
    for index in range(count):
        t = trajectory("acme", base + index * MINUTE)
        call = rec.llm_call(t)
        rec.events[-1] = call.model_copy(
            update={"action": MessageAction(content=f"answer {index}")}
        )
        made.append(t)
    store(engine, made, rec.events)
    return made


def test_failing_cases_replay_as_past_failures_and_fixed_ones_must_hold(engine) -> None:
    a, b, c = recorded(engine, 3)
    gone = uuid.uuid4()  # its events expired
    with transaction(engine) as session:
        held = add_evaluation_cases(
            session,
            AGENT,
            [
                case(a.id, required_facts=["Bags: thirty kilos."]),
                case(b.id, "fixed", required_facts=["Lounge at six."]),
                case(c.id),
                case(gone),
            ],
            author="t",
            reason="t",
        )
        events = evaluation_set_events(session, held)
    replayed, skipped = replay_cases(held, events, besides=[c.id])
    failing, fixed = replayed
    assert failing.recorded_success is False and failing.context.recorded_success is False
    assert failing.context.required_facts == ["Bags: thirty kilos."]
    # A fixed case is judged by its facts with the known successes, not by the failure
    # it recorded.
    assert fixed.recorded_success is True and fixed.context.recorded_success is None
    assert skipped == {str(gone): "its recorded calls are gone (retention)"}
    assert replay_cases(held, events, tenants=["globex"]) == ([], {})  # out of scope
    assert len(replay_cases(held, events, tenants=["acme"])[0]) == 3


def test_a_case_sees_its_trajectory_only_as_its_own_tenant(engine) -> None:
    a, b = recorded(engine, 2)
    with transaction(engine) as session:
        held = add_evaluation_cases(
            session, AGENT, [case(a.id), case(b.id, tenant="globex")], author="t", reason="t"
        )
        events = evaluation_set_events(session, held)
    assert [e.trajectory_id for e in events[a.id]] == [a.id] * len(events[a.id])
    assert events[a.id] and events[b.id] == []


def test_required_safety_cases_join_the_suite_absolute() -> None:
    def safety(name: str, required: bool = False) -> SafetyCase:
        return SafetyCase.model_validate(
            {
                "name": name,
                "messages": [{"role": "user", "content": name}],
                "checks": [{"kind": "must_refuse"}],
                "required": required,
            }
        )

    now = utcnow()
    held = EvaluationSet(
        id=f"{AGENT}/default@v1", agent=AGENT, name="default", number=1, content_hash="h",
        parent_id=None, author="t", reason="t", created_at=now,
        cases=[
            EvaluationCase(key="safety:b", kind="safety", safety=safety("b").model_dump()),
            EvaluationCase(key="safety:z", kind="safety", safety=safety("z").model_dump()),
        ],
    )  # fmt: skip
    required = required_safety_cases(held)
    assert [(c.name, c.required) for c in required] == [("b", True), ("z", True)]
    merged = with_required([safety("a"), safety("b")], required)
    assert [(c.name, c.required) for c in merged] == [("a", False), ("b", True), ("z", True)]
    assert required_safety_cases(None) == []


def test_a_promotions_fixed_failures_become_fixed_cases() -> None:
    known, new, unknown = (str(uuid.uuid4()) for _ in range(3))
    now = utcnow()
    held = EvaluationSet(
        id=f"{AGENT}/default@v1", agent=AGENT, name="default", number=1, content_hash="h",
        parent_id=None, author="t", reason="t", created_at=now,
        cases=[case(uuid.UUID(known), required_facts=["kept"], feedback=["users' words"])],
    )  # fmt: skip
    made = fixed_failure_cases(
        [known, new, unknown],
        {known: "acme", new: "globex"},
        held=held,
        facts={new: ["Lounge at six."]},
        feedback={new: ["the lounge opens at six"]},
        origin="fixed by v2",
    )
    assert [(c.trajectory_id, c.status, c.required_facts) for c in made] == [
        (uuid.UUID(known), "fixed", ["kept"]),
        (uuid.UUID(new), "fixed", ["Lounge at six."]),
    ]
    assert made[0].feedback == ["users' words"] and made[1].tenant == "globex"


def test_the_harness_optimiser_learns_the_sets_cases_with_their_feedback(engine) -> None:
    (old,) = recorded(engine, 1)
    said = "My bag allowance is thirty kilos now."
    with transaction(engine) as session:
        held = add_evaluation_cases(
            session,
            AGENT,
            [case(old.id, required_facts=["Bags: thirty kilos."], feedback=[said])],
            author="t",
            reason="t",
        )
        window = WindowSpec(agent=AGENT, since=utcnow() - timedelta(hours=1))
        assert read_harness_cases(session, window) == []  # nothing in the window itself
        (learned,) = read_harness_cases(session, window, evaluation=held)
    assert learned.trajectory_id == str(old.id) and not learned.succeeded
    assert learned.required_facts == ["Bags: thirty kilos."] and learned.feedback == [said]
    words = gepa_feedback(learned, 0.0)
    assert said in words and "A good answer states: Bags: thirty kilos." in words


def test_gepa_feedback_without_users_words_says_the_score() -> None:
    success = HarnessCase(trajectory_id="t", messages=[], recorded_answer="Booked.", succeeded=True)
    assert gepa_feedback(success, 1.0) == (
        "This answer scored 1.00 of 1. Users accepted the recorded answer: Booked."
    )
