"""An evaluation set's cases as the replay gate uses them, and the cases a promotion adds.

A failing case is replayed as a past failure: the candidate should do better than stable
on it (by its required facts, else by not repeating the recorded answer's outcome). A
fixed case is replayed beside the known successes, judged by its facts alone (its recorded
outcome was the failure that was fixed): a candidate must not break it again. Required
safety cases join the safety suite, absolute: the candidate must pass them even where its
parent fails.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from atdp import Event
from evolution.replay import RecordedTrajectory
from evolution.replay.scorers import ScoringContext
from evolution.safety import SafetyCase
from registry import EvaluationCase, EvaluationSet

__all__ = ["fixed_failure_cases", "replay_cases", "required_safety_cases", "with_required"]


def replay_cases(
    evaluation_set: EvaluationSet,
    events: Mapping[uuid.UUID, list[Event]],
    *,
    besides: Sequence[uuid.UUID] = (),
    tenants: Sequence[str] | None = None,
) -> tuple[list[RecordedTrajectory], dict[str, str]]:
    """The set's trajectory cases to replay, and why others cannot be (their events expired).

    Args:
        events: each case's recorded events, as read from the registry.
        besides: trajectories the gate replays already (from the window): not twice.
        tenants: the tenants in the evolution's scope (None: all).
    """
    replayed, skipped = [], {}
    for case in evaluation_set.cases:
        if case.kind != "trajectory" or case.trajectory_id in besides:
            continue
        if tenants is not None and case.tenant not in tenants:
            continue
        recorded = events.get(case.trajectory_id) or []
        if not any(event.kind == "llm_call" for event in recorded):
            skipped[str(case.trajectory_id)] = "its recorded calls are gone (retention)"
            continue
        replayed.append(_recorded(case, recorded))
    return replayed, skipped


def _recorded(case: EvaluationCase, events: list[Event]) -> RecordedTrajectory:
    fixed = case.status == "fixed"
    context = ScoringContext(
        recorded_success=None if fixed else False, required_facts=list(case.required_facts)
    )
    return RecordedTrajectory(events, fixed, case.tenant or "", context)


def required_safety_cases(evaluation_set: EvaluationSet | None) -> list[SafetyCase]:
    """The set's safety cases, each required."""
    if evaluation_set is None:
        return []
    return [
        SafetyCase.model_validate({**case.safety, "required": True})
        for case in evaluation_set.cases
        if case.kind == "safety" and case.safety
    ]


def with_required(suite: Sequence[SafetyCase], required: Sequence[SafetyCase]) -> list[SafetyCase]:
    """The suite with `required` in it: a case of the same name becomes required (the
    set's copy of it), the others are added at the end."""
    by_name = {case.name: case for case in required}
    merged = [by_name.pop(case.name, case) for case in suite]
    return [*merged, *by_name.values()]


def fixed_failure_cases(
    fixed: Sequence[str],
    tenants: Mapping[str, str],
    *,
    held: EvaluationSet | None,
    facts: Mapping[str, list[str]],
    feedback: Mapping[str, list[str]],
    origin: str,
) -> list[EvaluationCase]:
    """The past failures a promoted candidate fixed, as cases that must stay fixed.

    A failure already in the set keeps its facts and feedback and becomes fixed; one from
    the window takes the facts and words its users gave (`facts`, `feedback`).

    Args:
        fixed: the trajectory ids the replay gate listed as fixed.
        tenants: the tenant of each.
        held: the set as it is.
    """
    cases = []
    for trajectory_id in fixed:
        key = EvaluationCase.trajectory_key(trajectory_id)
        known = held.case(key) if held else None
        if known is not None:
            cases.append(known.model_copy(update={"status": "fixed", "origin": origin}))
            continue
        if trajectory_id not in tenants:
            continue
        cases.append(
            EvaluationCase(
                key=key,
                kind="trajectory",
                status="fixed",
                trajectory_id=uuid.UUID(trajectory_id),
                tenant=tenants[trajectory_id],
                required_facts=list(facts.get(trajectory_id, [])),
                feedback=list(feedback.get(trajectory_id, [])),
                origin=origin,
            )
        )
    return cases
