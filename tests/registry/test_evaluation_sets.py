"""Evaluation sets: immutable numbered versions, the same content never twice, capped."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from registry import (
    EvaluationCase,
    add_evaluation_cases,
    get_evaluation_set,
    latest_evaluation_set,
    list_evaluation_sets,
    remove_evaluation_cases,
    transaction,
)
from tests.registry.helpers import seed_world

AGENT = "support-bot"


def case(n: int, status: str = "failing", facts: tuple[str, ...] = ()) -> EvaluationCase:
    trajectory = uuid.UUID(int=n)
    return EvaluationCase(
        key=EvaluationCase.trajectory_key(trajectory),
        kind="trajectory",
        status=status,
        trajectory_id=trajectory,
        tenant="acme",
        required_facts=list(facts),
    )


def test_each_change_is_a_new_version_and_the_same_content_is_the_same_version(engine) -> None:
    seed_world(engine)
    with transaction(engine) as session:
        assert latest_evaluation_set(session, AGENT) is None
        first = add_evaluation_cases(session, AGENT, [case(1)], author="ana", reason="review")
        again = add_evaluation_cases(session, AGENT, [case(1)], author="ana", reason="retry")
        second = add_evaluation_cases(
            session, AGENT, [case(1, "fixed", ("30 kg",)), case(2)], author="evo", reason="fix"
        )
        third = remove_evaluation_cases(session, AGENT, [case(2).key], author="ana", reason="x")
    assert first.id == f"{AGENT}/default@v1" and again.id == first.id
    assert second.number == 2 and second.parent_id == first.id
    assert second.case(case(1).key).status == "fixed"  # replaced, not duplicated
    assert [c.key for c in second.cases] == [case(1).key, case(2).key]
    assert third.number == 3 and [c.key for c in third.cases] == [case(1).key]
    with transaction(engine) as session:
        assert get_evaluation_set(session, AGENT, "default", 1).cases == [case(1)]
        assert [s.number for s in list_evaluation_sets(session, AGENT)] == [3, 2, 1]
    with pytest.raises(sa.exc.DBAPIError), engine.begin() as connection:
        connection.execute(sa.text("DELETE FROM evaluation_set"))


def test_a_capped_set_drops_the_oldest_fixed_cases_first(engine) -> None:
    seed_world(engine)
    cases = [case(1, "fixed"), case(2), case(3, "fixed"), case(4)]
    with transaction(engine) as session:
        kept = add_evaluation_cases(session, AGENT, cases, author="t", reason="t", max_cases=3)
        assert [c.key for c in kept.cases] == [case(2).key, case(3).key, case(4).key]
        kept = add_evaluation_cases(session, AGENT, [case(5)], author="t", reason="t", max_cases=2)
        assert [c.key for c in kept.cases] == [case(4).key, case(5).key]


def test_names_and_cases_are_checked() -> None:
    with pytest.raises(ValidationError, match="trajectory_id and tenant"):
        EvaluationCase(key="trajectory:x", kind="trajectory")
    with pytest.raises(ValidationError, match="holds the case"):
        EvaluationCase(key="safety:x", kind="safety")


@given(
    facts=st.lists(st.text(min_size=1, max_size=20), max_size=4),
    feedback=st.lists(st.text(max_size=40), max_size=3),
    status=st.sampled_from(["failing", "fixed"]),
)
def test_cases_survive_their_json(facts, feedback, status) -> None:
    made = case(7, status, tuple(facts)).model_copy(update={"feedback": feedback})
    assert EvaluationCase.model_validate_json(made.model_dump_json()) == made
