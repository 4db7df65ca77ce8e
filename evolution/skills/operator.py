"""The skill operator: a procedure users keep walking the agent through becomes a skill of
a candidate version.

The decision names a procedural failure: a task type going wrong at one step
(`evolution.analysis.procedures`). The operator reads the window's trajectories of that
task type, their tool calls in order, their opening requests and users' guidance
(`evolution.corrections`), and distils a skill (`evolution.skills.distil`): the tool calls
that made the task succeed and what users said at the failing step, described by the words
the task's requests share and scoped to the task type. Before the gates run, it proves by
replay of the targeted failures' requests through the gateway's own skill retrieval that
the skill reaches them (and says how often it would reach other tasks' requests); the
replay, shadow and canary gates then measure what it does to answers. It runs in two steps
(`activities.operators.skills`): the activity reads (`skill_evidence` of what it read),
`propose_skill` distils and proves.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from atdp import Event, Reward, Skill, SkillSet, ToolCallAction, VersionSpec
from evolution.analysis.procedures import first_guided_step
from evolution.analysis.rates import task_succeeded
from evolution.analysis.trajectories import by_trajectory, task_type
from evolution.corrections import CorrectionJudge, CorrectionRecords, UserCorrection
from evolution.decision import DecisionRecord
from evolution.operators import Candidate, OperatorError
from evolution.skills.distil import (
    GuidanceTurn,
    TaskTrajectory,
    argument_names,
    distil_skill,
)
from evolution.window import FailureKind
from registry import AgentVersion, UserTurn, WindowTrajectory
from runtime.version.skills import SkillIndex

__all__ = [
    "SkillEvidence",
    "SkillProof",
    "propose_skill",
    "prove_skill",
    "skill_evidence",
    "task_trajectories",
]

# The share of the targeted failures' requests the skill must reach for it to be proposed.
MIN_REACH = 0.8


@dataclass(frozen=True)
class RecordedCall:
    """One tool call of a trajectory: when, which tool, which arguments, whether it worked."""

    at: datetime
    tool: str
    arguments: tuple[str, ...]
    ok: bool


@dataclass(frozen=True)
class SkillEvidence:
    """What the operator reads: the window's correction records, each trajectory's tool
    calls in order, and its opening request."""

    records: CorrectionRecords
    calls: dict[uuid.UUID, list[RecordedCall]]
    requests: dict[uuid.UUID, str]


@dataclass(frozen=True)
class SkillProof:
    """The replay of requests through the candidate's skill retrieval.

    Args:
        targeted: the failures' requests replayed; reached: those the skill reached.
        others: other task types' requests replayed; leaked: those it reached too.
    """

    targeted: int
    reached: int
    others: int
    leaked: int

    @property
    def reach(self) -> float:
        return self.reached / self.targeted if self.targeted else 0.0

    def __str__(self) -> str:
        leak = f"; {self.leaked} of {self.others} other tasks' requests" if self.others else ""
        return f"reaches {self.reached} of {self.targeted} targeted requests{leak}"


def skill_evidence(
    records: CorrectionRecords,
    messages: Mapping[uuid.UUID, list[Event]],
    tool_calls: Mapping[uuid.UUID, list[Event]],
) -> SkillEvidence:
    """The evidence, from the window's correction records and its user_message and tool_call
    events by trajectory (`registry.window_events`)."""
    requests = {
        trajectory_id: text
        for trajectory_id, events in messages.items()
        if (text := _opening(events)) is not None
    }
    calls = {trajectory_id: _calls(events) for trajectory_id, events in tool_calls.items()}
    return SkillEvidence(records, calls, requests)


def propose_skill(
    evidence: SkillEvidence,
    parent: AgentVersion,
    decision: DecisionRecord,
    *,
    judge: CorrectionJudge | None = None,
) -> Candidate:
    """The candidate: the parent with the distilled skill added (or replacing its own).

    Raises:
        OperatorError: the decision targets no procedural failure, the window holds nothing
            to distil, or the skill does not reach the failures it targets.
    """
    kind, step = _target(decision)
    members = task_trajectories(evidence, kind, evidence.records.corrections(judge))
    skill = distil_skill(kind, step, members)
    if skill is None:
        raise OperatorError(
            f"the window holds neither guidance at step {step} of '{kind}' nor a successful "
            "trajectory of it to learn the procedure from; widen the window"
        )
    spec = with_skill(parent.spec, skill)
    proof = prove_skill(spec.skills, skill, kind, step, members, evidence)
    if proof.reach < MIN_REACH:
        raise OperatorError(
            f"the distilled skill {proof} of step {step} of '{kind}' (needs "
            f"{MIN_REACH:.0%}): its requests share too few words to be retrieved"
        )
    return _candidate(spec, skill, kind, step, members, proof)


def with_skill(spec: VersionSpec, skill: Skill) -> VersionSpec:
    """`spec` with `skill` added, or in place of its skill of the same name."""
    items = [s for s in spec.skills.items if s.name != skill.name] + [skill]
    return spec.model_copy(update={"skills": spec.skills.model_copy(update={"items": items})})


def task_trajectories(
    evidence: SkillEvidence, kind: str, corrections: Sequence[UserCorrection]
) -> list[TaskTrajectory]:
    """Every trajectory of the task type `kind`, read for distilling."""
    records = evidence.records
    rewards = by_trajectory(records.rewards)
    turns: dict[uuid.UUID, list[UserTurn]] = defaultdict(list)
    for turn in records.turns:
        turns[turn.trajectory_id].append(turn)
    said: dict[uuid.UUID, list[UserCorrection]] = defaultdict(list)
    for correction in corrections:
        said[correction.trajectory_id].append(correction)
    return [
        _task_trajectory(
            t, turns[t.id], said[t.id], evidence.calls.get(t.id, []), rewards, evidence.requests
        )
        for t in records.trajectories
        if task_type(t) == kind
    ]


def prove_skill(
    skills: SkillSet,
    skill: Skill,
    kind: str,
    step: int,
    members: Sequence[TaskTrajectory],
    evidence: SkillEvidence,
) -> SkillProof:
    """Replay the targeted failures' opening requests, and every other task type's, through
    the candidate's skill retrieval, naming no task type (as a replay of a request recorded
    without one would): which does the skill reach?"""
    index = SkillIndex(skills)

    def reaches(request: str, tenant: str) -> bool:
        return any(hit.skill.name == skill.name for hit in index.search(request, tenant, None))

    targeted = [t for t in members if t.guided_step == step and t.request]
    others = [
        t
        for t in evidence.records.trajectories
        if task_type(t) != kind and evidence.requests.get(t.id)
    ]
    return SkillProof(
        targeted=len(targeted),
        reached=sum(reaches(t.request or "", t.tenant) for t in targeted),
        others=len(others),
        leaked=sum(reaches(evidence.requests[t.id], t.tenant) for t in others),
    )


def _target(decision: DecisionRecord) -> tuple[str, int]:
    target = decision.target
    if (
        target is None
        or target.kind is not FailureKind.PROCEDURE
        or target.step is None
        or not target.task_types
    ):
        what = "no failure" if target is None else f"a {target.kind.value} failure ({target.key})"
        raise OperatorError(
            f"the skill operator distils a procedure a task type fails at one step; the "
            f"decision targets {what}: choose the operator for that failure"
        )
    return target.task_types[0], target.step


def _task_trajectory(
    trajectory: WindowTrajectory,
    turns: list[UserTurn],
    corrections: list[UserCorrection],
    calls: list[RecordedCall],
    rewards: Mapping[uuid.UUID, list[Reward]],
    requests: dict[uuid.UUID, str],
) -> TaskTrajectory:
    first = first_guided_step(turns, corrections)
    return TaskTrajectory(
        id=trajectory.id,
        tenant=trajectory.tenant,
        session=trajectory.session,
        request=requests.get(trajectory.id),
        succeeded=task_succeeded(trajectory, rewards.get(trajectory.id, [])),
        guided_step=first[0] if first else None,
        guidance=_guidance(turns, corrections),
        calls=_as_guided(calls, turns, first[0] if first else None),
    )


def _as_guided(
    calls: list[RecordedCall], turns: list[UserTurn], step: int | None
) -> list[tuple[str, tuple[str, ...]]]:
    """The calls that worked, in the order the guidance says: those of the answer users
    corrected move after the ones their guidance led to (and go where a later call
    repeats them)."""
    worked = [call for call in calls if call.ok]
    ordered = sorted(turns, key=lambda t: t.created_at)
    if step is None or step > len(ordered):
        return [(call.tool, call.arguments) for call in worked]
    corrected_at = ordered[step - 1].created_at
    after = ordered[step - 2].created_at if step >= 2 else None
    early = [c for c in worked if c.at < corrected_at and (after is None or c.at > after)]
    later = [c for c in worked if c.at >= corrected_at]
    kept = [c for c in worked if c not in early and c not in later]
    moved = [c for c in early if c.tool not in {call.tool for call in later}]
    return [(call.tool, call.arguments) for call in [*kept, *later, *moved]]


def _calls(events: list[Event]) -> list[RecordedCall]:
    """A trajectory's tool calls, oldest first, one per call id (the gateway and the
    agent's own report may both record a call)."""
    seen: set[str] = set()
    found = []
    for event in sorted(events, key=lambda e: (e.created_at, e.seq)):
        action = event.action
        if not isinstance(action, ToolCallAction):
            continue
        call = action.call
        if call.id and call.id in seen:
            continue
        seen.add(call.id)
        ok = event.outcome is None or event.outcome.success is not False
        found.append(RecordedCall(event.created_at, call.name, argument_names(call.arguments), ok))
    return found


def _guidance(turns: list[UserTurn], corrections: list[UserCorrection]) -> list[GuidanceTurn]:
    """Each located correction with the step of the answer it corrected."""
    found = []
    for correction in corrections:
        located = first_guided_step(turns, [correction])
        if located is not None:
            found.append(GuidanceTurn(located[0], correction.text, correction.source))
    return found


def _opening(events) -> str | None:
    """The text of a trajectory's first user message (the one that answers no call)."""
    for event in events:
        if event.parent_id is None and event.observation is not None:
            for message in event.observation.messages:
                if message.role == "user" and isinstance(message.content, str):
                    return message.content
    return None


def _candidate(
    spec: VersionSpec,
    skill: Skill,
    kind: str,
    step: int,
    members: Sequence[TaskTrajectory],
    proof: SkillProof,
) -> Candidate:
    guided = sum(t.guided_step == step for t in members)
    learned = sum(bool(t.succeeded and t.calls) for t in members)
    scope = ", ".join(skill.tenants) if skill.tenants else "every tenant"
    return Candidate(
        spec=spec,
        summary=(
            f"skill '{skill.name}' for step {step} of '{kind}' ({len(skill.steps)} steps, "
            f"from {guided} guided and {learned} successful trajectories)"
        ),
        changes=[
            f"added skill '{skill.name}' ({scope}; task type {kind})",
            *[f"step {n}: {text}" for n, text in enumerate(skill.steps, 1)],
            f"replay: {proof}",
        ],
        evidence={
            "task_type": kind,
            "step": step,
            "guided": guided,
            "learned_from": learned,
            "skill": skill.model_dump(mode="json"),
            "replay": {
                "targeted": proof.targeted,
                "reached": proof.reached,
                "others": proof.others,
                "leaked": proof.leaked,
            },
        },
    )
