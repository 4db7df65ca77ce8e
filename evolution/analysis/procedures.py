"""Procedural failures: a task type's multi-step trajectories going wrong at the same step
until users walk the agent through it (the evidence for a skill).

Read off structure only: each trajectory's task type, the position of the first answer
users corrected among its answers they replied to, whether the trajectory then succeeded,
and how consistent that position is across sessions. No words are read.
"""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from atdp import Reward
from evolution.analysis.rates import as_rate, task_succeeded
from evolution.analysis.trajectories import task_type
from evolution.corrections import UserCorrection
from evolution.window import ProcedureFailure
from registry import UserTurn, WindowTrajectory

__all__ = ["first_guided_step", "procedure_failures"]

# Guidance at the first answer is a wrong fact or instruction, not a procedure going wrong
# part-way: a procedural failure needs an earlier step that went right.
_FIRST_PROCEDURAL_STEP = 2
_EXAMPLES = 5
_EXAMPLE_CHARS = 200


def first_guided_step(
    turns: Sequence[UserTurn], corrections: Sequence[UserCorrection]
) -> tuple[int, UserCorrection] | None:
    """The step (1-based position among the answers users replied to, else one past them)
    of a trajectory's first correction naming an answer, with that correction."""
    answers = [turn.parent_id for turn in sorted(turns, key=lambda t: t.created_at)]
    located = [c for c in corrections if c.answer is not None]
    if not located:
        return None
    first = min(located, key=lambda c: c.at)
    step = answers.index(first.answer) + 1 if first.answer in answers else len(answers) + 1
    return step, first


def procedure_failures(
    trajectories: Sequence[WindowTrajectory],
    rewards: Mapping[uuid.UUID, list[Reward]],
    corrections: Sequence[UserCorrection],
    turns: Sequence[UserTurn],
) -> list[ProcedureFailure]:
    """Per task type, the step where its guided trajectories most often first went wrong,
    when that is a later step than the first; largest first."""
    turns_of: dict[uuid.UUID, list[UserTurn]] = defaultdict(list)
    for turn in turns:
        turns_of[turn.trajectory_id].append(turn)
    corrections_of: dict[uuid.UUID, list[UserCorrection]] = defaultdict(list)
    for correction in corrections:
        corrections_of[correction.trajectory_id].append(correction)
    by_task: dict[str, list[WindowTrajectory]] = defaultdict(list)
    for trajectory in trajectories:
        by_task[task_type(trajectory)].append(trajectory)
    found = [
        failure
        for kind, members in sorted(by_task.items())
        if (
            failure := _task_failure(kind, members, rewards, corrections_of, turns_of, trajectories)
        )
    ]
    return sorted(found, key=lambda f: (-f.trajectories, f.task_type))


def _task_failure(
    kind: str,
    members: Sequence[WindowTrajectory],
    rewards: Mapping[uuid.UUID, list[Reward]],
    corrections_of: Mapping[uuid.UUID, list[UserCorrection]],
    turns_of: Mapping[uuid.UUID, list[UserTurn]],
    window: Sequence[WindowTrajectory],
) -> ProcedureFailure | None:
    guided = {
        t.id: found
        for t in members
        if (found := first_guided_step(turns_of.get(t.id, []), corrections_of.get(t.id, [])))
    }
    if not guided:
        return None
    steps = Counter(step for step, _ in guided.values())
    step, count = min(steps.items(), key=lambda item: (-item[1], item[0]))
    if step < _FIRST_PROCEDURAL_STEP:
        return None
    at_step = [t for t in members if t.id in guided and guided[t.id][0] == step]
    outcomes = [task_succeeded(t, rewards.get(t.id, [])) for t in at_step]
    known = [outcome for outcome in outcomes if outcome is not None]
    unguided = [t for t in members if not corrections_of.get(t.id)]
    guidance = [guided[t.id][1] for t in at_step]
    return ProcedureFailure(
        task_type=kind,
        step=step,
        trajectories=count,
        sessions=len({(t.tenant, t.session) for t in at_step}),
        located=len(guided),
        consistency=count / len(guided),
        fixed=as_rate(sum(known), len(known)),
        task_trajectories=len(members),
        successes=sum(task_succeeded(t, rewards.get(t.id, [])) is True for t in unguided),
        share=min(1.0, count / len(window)),
        tenants=sorted({t.tenant for t in at_step}),
        example_event_ids=list(dict.fromkeys(c.answer for c in guidance if c.answer))[:_EXAMPLES],
        examples=list(dict.fromkeys(_short(c.text) for c in guidance))[:_EXAMPLES],
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"
