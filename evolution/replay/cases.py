"""Which recorded trajectories the replay gate replays: past failures and known successes.

A candidate must fix some of what failed and break nothing that worked, so the gate
replays both kinds from the decision's window. A trajectory counts as a failure or a
success by its effective reward (the one place rewards are combined), else by its
recorded outcome, else by the users' corrections (a follow-up read as dissatisfied makes
one, with no score); trajectories with none of these say nothing and are left out. Facts
users supplied in corrections become the trajectory's required facts: a good replayed
answer states them. What users had to ask for (an instruction the answer lacked) becomes
what the agent then gave (`asked_for`): a good first answer now gives it unasked.

The reader (`activities.evidence.recorded_cases`) reads the window, asks the registry which
of its trajectories hold an answer, and reads the chosen ones' events in one go.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from atdp import Event, EventKind, MessageAction, Reward
from evolution.analysis.trajectories import by_trajectory
from evolution.corrections import CorrectionKind, UserCorrection
from evolution.followups import asked_for
from evolution.memory.distil import facts_supplied
from evolution.replay import RecordedTrajectory
from evolution.replay.scorers import ScoringContext
from registry import WindowTrajectory, effective_reward

__all__ = ["CaseVerdict", "asked_in", "case_verdicts", "chosen_cases", "recorded_trajectories"]

_SUCCESS, _FAILURE = {"success"}, {"failure", "error", "abandoned"}


@dataclass(frozen=True)
class CaseVerdict:
    """A trajectory of the window that says whether it succeeded, and its reward in [0, 1]."""

    trajectory: WindowTrajectory
    succeeded: bool
    reward: float | None


def case_verdicts(
    trajectories: Iterable[WindowTrajectory],
    rewards: Iterable[Reward],
    corrections: Iterable[UserCorrection],
) -> list[CaseVerdict]:
    """Every trajectory that counts as a failure or a success, in the window's order (newest
    first): the window's trajectories and rewards, and its corrections read offline."""
    corrected = {c.trajectory_id for c in corrections}
    by_id = by_trajectory(rewards)
    verdicts = []
    for row in trajectories:
        succeeded, reward = _verdict(row, by_id.get(row.id, []), row.id in corrected)
        if succeeded is not None:
            verdicts.append(CaseVerdict(row, succeeded, reward))
    return verdicts


def chosen_cases(
    verdicts: Iterable[CaseVerdict], answered: Collection[uuid.UUID], per_kind: int = 20
) -> list[CaseVerdict]:
    """Up to `per_kind` past failures, then up to `per_kind` known successes, newest first,
    of the trajectories with an answer to replay (`answered`: those holding an llm call)."""
    picked: dict[bool, list[CaseVerdict]] = {True: [], False: []}
    for verdict in verdicts:
        if len(picked[verdict.succeeded]) >= per_kind or verdict.trajectory.id not in answered:
            continue
        picked[verdict.succeeded].append(verdict)
        if all(len(found) >= per_kind for found in picked.values()):
            break
    return picked[False] + picked[True]


def recorded_trajectories(
    chosen: Sequence[CaseVerdict],
    events: Mapping[uuid.UUID, list[Event]],
    corrections: Sequence[UserCorrection],
) -> list[RecordedTrajectory]:
    """The chosen cases with their events, in order, and what users taught in corrections."""
    facts = facts_supplied(corrections)
    asks = _instructions(corrections)
    cases = []
    for verdict in chosen:
        row, recorded = verdict.trajectory, events.get(verdict.trajectory.id, [])
        context = ScoringContext(
            recorded_reward=verdict.reward,
            recorded_success=verdict.succeeded,
            required_facts=facts.get(row.id, []),
            asked_for=asked_in(recorded, asks.get(row.id, [])),
        )
        cases.append(RecordedTrajectory(recorded, verdict.succeeded, row.tenant, context))
    return cases


def _instructions(corrections: list[UserCorrection]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """Per trajectory, the user messages that asked for what an answer lacked."""
    found: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
    for correction in corrections:
        if correction.kind is CorrectionKind.INSTRUCTION and correction.event_id is not None:
            found[correction.trajectory_id].append(correction.event_id)
    return found


def asked_in(events: list[Event], asking: list[uuid.UUID]) -> list[str]:
    """What the agent gave once users asked (the messages `asking`), that its answer
    before did not (`evolution.followups.asked_for`)."""
    found: list[str] = []
    ordered = sorted(events, key=lambda e: e.seq)
    for message in asking:
        at = next((i for i, e in enumerate(ordered) if e.id == message), None)
        if at is None:
            continue
        before = [_said(e) for e in ordered[:at] if _said(e)]
        after = next((_said(e) for e in ordered[at + 1 :] if _said(e)), None)
        if before and after:
            found += [item for item in asked_for(before[-1], after) if item not in found]
    return found


def _said(event: Event) -> str | None:
    if event.kind is not EventKind.LLM_CALL or not isinstance(event.action, MessageAction):
        return None
    content = (event.action.content or "").strip()
    return content or None


def _verdict(
    row: WindowTrajectory, rewards: list[Reward], corrected: bool
) -> tuple[bool | None, float | None]:
    """(succeeded, reward in [0, 1]) from the effective reward, else the outcome status,
    else a failure when users corrected it."""
    reward = effective_reward(rewards)
    if reward is not None:
        value = min(max(reward.value, 0.0), 1.0)
        return value >= 0.5, value
    if row.outcome_status in _SUCCESS:
        return True, None
    if row.outcome_status in _FAILURE or corrected:
        return False, None
    return None, None
