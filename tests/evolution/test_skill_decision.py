"""The `skill` decision: a task type's multi-step trajectories going wrong at one step across
sessions, fixed when users guide it, read off structure alone (never off words)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from evolution.analysis.procedures import first_guided_step, procedure_failures
from evolution.corrections import CorrectionKind, UserCorrection
from evolution.decision import Action, PolicyConfig, decide, fallbacks
from evolution.window import FailureKind, ProcedureFailure
from registry import UserTurn, WindowTrajectory
from tests.evolution.test_decision import MISSING_FACT, cluster, rate, score_of, window

T0 = datetime(2026, 3, 1, tzinfo=UTC)


def procedure(
    *,
    task_type: str = "account-migration",
    step: int = 3,
    trajectories: int = 60,
    sessions: int = 60,
    consistency: float = 0.9,
    fixed: tuple[int, int] = (55, 60),
    window_size: int = 400,
) -> ProcedureFailure:
    return ProcedureFailure(
        task_type=task_type,
        step=step,
        trajectories=trajectories,
        sessions=sessions,
        located=max(trajectories, round(trajectories / consistency)),
        consistency=consistency,
        fixed=rate(*fixed),
        task_trajectories=trajectories + 20,
        successes=15,
        share=trajectories / window_size,
        tenants=["tenant-0", "tenant-1"],
        examples=["first you must do the other thing"],
    )


# What users' guidance looks like to the failure clusters: corrections of one meaning.
GUIDANCE = cluster(FailureKind.TASK, "do the other thing first", trajectories=60)


def test_a_procedure_users_keep_guiding_is_a_skill() -> None:
    record = decide(window(failures=[GUIDANCE], procedures=[procedure()]))
    assert record.action is Action.SKILL, record.reason
    assert record.target is not None and record.target.kind is FailureKind.PROCEDURE
    assert record.target.step == 3 and record.target.task_types == ["account-migration"]
    assert "step 3 of 'account-migration'" in record.reason
    signals = record.signals
    assert signals["procedures"] == 1
    assert signals["top_procedure_task_type"] == "account-migration"
    assert signals["top_procedure_step"] == 3
    assert signals["top_procedure_consistency"] == 0.9
    assert signals["top_procedure_sessions"] == 60
    assert signals["top_procedure_fixed_rate"] == 55 / 60
    # The guidance cluster is still there for the other actions, which score lower.
    assert score_of(record, Action.SKILL) > score_of(record, Action.HARNESS)


def test_without_a_procedure_the_skill_scores_nothing_and_says_why() -> None:
    record = decide(window(failures=[MISSING_FACT]))
    assert record.action is Action.MEMORY
    skill = next(s for s in record.scores if s.action is Action.SKILL)
    assert skill.expected_gain == 0.0
    assert "no task type goes wrong" in skill.evidence
    assert record.signals["top_procedure_step"] is None


def test_each_structural_condition_is_needed() -> None:
    config = PolicyConfig()
    short = {
        "scattered steps": procedure(consistency=config.skill_min_consistency - 0.1),
        "guidance does not fix it": procedure(fixed=(10, 60)),
        "one or two sessions": procedure(sessions=config.skill_min_sessions - 1),
        "too few trajectories": procedure(trajectories=config.min_cluster_trajectories - 1),
    }
    for why, found in short.items():
        record = decide(window(failures=[GUIDANCE], procedures=[found]))
        assert record.action is not Action.SKILL, why
        skill = next(s for s in record.scores if s.action is Action.SKILL)
        assert skill.expected_gain == 0.0 and "falls short" in skill.evidence, why


def test_a_missing_fact_of_the_same_size_stays_memory() -> None:
    # Users supplying a fact mid-task read as a procedure too; memory is the cheaper fit.
    record = decide(window(failures=[MISSING_FACT], procedures=[procedure(consistency=1.0)]))
    assert record.action is Action.MEMORY
    assert Action.SKILL in [score.action for score in fallbacks(record, PolicyConfig())]


def test_a_skill_may_be_forced_onto_the_top_procedure() -> None:
    weak = procedure(consistency=0.3)
    record = decide(window(failures=[GUIDANCE], procedures=[weak]), force=Action.SKILL)
    assert record.action is Action.SKILL and record.forced
    assert record.target is not None and record.target.step == weak.step


def test_too_little_traffic_is_noop_for_a_skill_too() -> None:
    record = decide(
        window(
            trajectories=20,
            procedures=[procedure(window_size=20, trajectories=10, sessions=10, fixed=(9, 10))],
        )
    )
    assert record.action is Action.NOOP


@settings(max_examples=40, deadline=None)
@given(
    task_type=st.text(min_size=1, max_size=30).filter(lambda s: s.isprintable()),
    example=st.text(max_size=80),
    step=st.integers(min_value=2, max_value=12),
)
def test_the_choice_never_depends_on_names_words_or_which_step(
    task_type: str, example: str, step: int
) -> None:
    found = procedure(task_type=task_type, step=step).model_copy(update={"examples": [example]})
    record = decide(window(failures=[GUIDANCE], procedures=[found]))
    baseline = decide(window(failures=[GUIDANCE], procedures=[procedure()]))
    assert record.action is Action.SKILL
    # Only the evidence sentences name the task type and the step; the numbers are the same.
    assert [s.score for s in record.scores] == [s.score for s in baseline.scores]


def trajectory(i: int, task: str, status: str | None, tenant: str = "acme") -> WindowTrajectory:
    return WindowTrajectory(
        id=uuid.UUID(int=i + 1),
        tenant=tenant,
        session=f"s{i}",
        task_type=task,
        version_id="v1",
        started_at=T0 + timedelta(minutes=i),
        outcome_status=status,
    )


def walk(t: WindowTrajectory, answers: int, guided_at: int | None):
    """`answers` answers each followed by a user turn; a correction of answer `guided_at`."""
    turns = [
        UserTurn(
            event_id=uuid.uuid4(),
            trajectory_id=t.id,
            parent_id=uuid.UUID(int=(t.id.int << 8) + n),
            created_at=t.started_at + timedelta(seconds=n),
            text=f"turn {n}",
        )
        for n in range(1, answers + 1)
    ]
    corrections = []
    if guided_at is not None:
        turn = turns[guided_at - 1]
        corrections.append(
            UserCorrection(
                text=turn.text or "",
                kind=CorrectionKind.OTHER,
                tenant=t.tenant,
                session=t.session,
                trajectory_id=t.id,
                source=str(turn.event_id),
                at=turn.created_at,
                answer=turn.parent_id,
            )
        )
    return turns, corrections


def records(plan: list[tuple[str, str | None, int, int | None]]):
    trajectories, turns, corrections = [], [], []
    for i, (task, status, answers, guided_at) in enumerate(plan):
        t = trajectory(i, task, status)
        found_turns, found_corrections = walk(t, answers, guided_at)
        trajectories.append(t)
        turns += found_turns
        corrections += found_corrections
    return trajectories, corrections, turns


def test_the_step_is_the_position_of_the_first_corrected_answer() -> None:
    t = trajectory(0, "x", None)
    turns, corrections = walk(t, 4, 3)
    assert first_guided_step(turns, corrections)[0] == 3
    assert first_guided_step(turns, []) is None


def test_a_task_type_guided_at_one_later_step_is_a_procedure_failure() -> None:
    plan = (
        [("migrate", "success", 4, 3)] * 8  # guided at step 3, then succeeded
        + [("migrate", "failure", 4, 3)] * 1
        + [("migrate", "success", 4, 2)] * 1  # one guided elsewhere
        + [("migrate", "success", 4, None)] * 4  # went right unguided
        + [("lookup", "success", 2, 1)] * 6  # guided at its first answer: not a procedure
    )
    trajectories, corrections, turns = records(plan)
    (found,) = procedure_failures(trajectories, {}, corrections, turns)
    assert (found.task_type, found.step, found.trajectories) == ("migrate", 3, 9)
    assert found.located == 10 and found.consistency == 0.9
    assert found.fixed.successes == 8 and found.fixed.total == 9
    assert found.successes == 4 and found.task_trajectories == 14
    assert found.sessions == 9 and found.share == 9 / 20
    assert found.cluster().key == "migrate@step 3"
