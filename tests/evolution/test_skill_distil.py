"""Distilling a skill from plain trajectory readings: the common tool sequence, the users'
representative guidance at the failing step, a description without per-request values."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from evolution.skills.distil import GuidanceTurn, TaskTrajectory, distil_skill


def reading(
    i: int,
    calls: list[str],
    *,
    succeeded: bool | None = True,
    guided: int | None = None,
    said: str = "",
    request: str = "please move the archive of case {i} to cold storage",
    tenant: str = "acme",
) -> TaskTrajectory:
    guidance = [GuidanceTurn(guided, said, f"event-{i}")] if guided else []
    return TaskTrajectory(
        id=uuid.UUID(int=i + 1),
        tenant=tenant,
        session=f"s{i}",
        request=request.format(i=1000 + i),
        succeeded=succeeded,
        guided_step=guided,
        guidance=guidance,
        calls=[(tool, ("case",)) for tool in calls],
    )


def test_the_common_sequence_and_the_representative_guidance() -> None:
    readings = [
        *(reading(i, ["find", "seal", "move"]) for i in range(5)),
        reading(5, ["find", "move"]),  # a rarer path
        reading(6, ["find", "seal", "move"], guided=2, said="seal the box before moving it"),
        reading(7, ["find", "seal", "move"], guided=2, said="you must seal the box first"),
        reading(8, ["find", "seal", "move"], guided=2, said="seal box before moving"),
    ]
    skill = distil_skill("archive", 2, readings)
    assert skill is not None
    assert [call.tool for call in skill.tool_calls] == ["find", "seal", "move"]
    assert skill.steps[0] == "Call find with case"
    assert (
        skill.steps[1] == "At step 2, as users had to tell the agent: seal the box before moving it"
    )
    assert skill.task_types == ["archive"] and skill.tenants == ["acme"]
    # The words most requests share, never a case number (it would match only its own).
    assert skill.description.startswith("archive: ")
    assert "archive" in skill.description and "1003" not in skill.description


def test_nothing_to_learn_from_is_none() -> None:
    failed = [reading(i, ["find"], succeeded=False) for i in range(3)]
    assert distil_skill("archive", 2, failed) is None


@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=5),
            st.booleans(),
            st.one_of(st.none(), st.integers(min_value=2, max_value=4)),
            st.text(max_size=40),
        ),
        max_size=12,
    )
)
def test_a_distilled_skill_is_always_a_valid_scoped_procedure(rows) -> None:
    readings = [
        reading(i, calls, succeeded=ok, guided=guided, said=said or "x")
        for i, (calls, ok, guided, said) in enumerate(rows)
    ]
    skill = distil_skill("task", 3, readings)
    if skill is None:
        return
    assert skill.steps and skill.task_types == ["task"]
    assert len(skill.tool_calls) <= max((len(r.calls) for r in readings), default=0)
