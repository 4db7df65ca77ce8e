"""Distilling a skill from a task type's trajectories: what the successful ones did, in
order, and what users told the agent at the step where the others went wrong.

Plain functions over `TaskTrajectory` values: the operator reads them from the registry.
No model is asked; every step of the skill is something recorded traffic did or said.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from atdp import Skill, SkillCall
from runtime.version.bm25 import tokenize

__all__ = ["GuidanceTurn", "TaskTrajectory", "distil_skill", "skill_name"]

# Words of the opening requests that a description keeps: those in at least this share of
# the task type's requests, at most this many, most common first.
_COMMON_SHARE = 0.4
_DESCRIPTION_TERMS = 12
_GUIDANCE_CHARS = 300
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class GuidanceTurn:
    """What a user told the agent after the answer at `step` went wrong."""

    step: int
    text: str
    source: str


@dataclass(frozen=True)
class TaskTrajectory:
    """One trajectory of the target task type, as the skill operator reads it.

    Args:
        succeeded: the task's outcome (None: unknown).
        guided_step: the step of its first located guidance (None: never guided).
        calls: its tool calls in order, as (tool, argument names).
    """

    id: uuid.UUID
    tenant: str
    session: str
    request: str | None
    succeeded: bool | None
    guided_step: int | None
    guidance: list[GuidanceTurn] = field(default_factory=list)
    calls: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)


def skill_name(task_type: str) -> str:
    """The skill's name for a task type's procedure."""
    return f"{task_type} procedure"[:200]


def distil_skill(task_type: str, step: int, trajectories: Sequence[TaskTrajectory]) -> Skill | None:
    """The procedure of `task_type`: the tool calls its successful trajectories made (the
    most common sequence), and users' guidance at `step` where it went wrong; None when
    there is neither guidance to learn from nor a successful trajectory."""
    guided = [t for t in trajectories if t.guided_step == step]
    guidance = [g for t in guided for g in t.guidance if g.step == step]
    worked = [t for t in trajectories if t.succeeded and t.calls]
    if not guidance and not worked:
        return None
    sketch = _common_calls(
        [t for t in worked if t.guided_step is None] or [t for t in worked if t in guided]
    )
    steps = [f"Call {tool}" + (f" with {', '.join(args)}" if args else "") for tool, args in sketch]
    said = _representative(guidance)
    if said is not None and said.text:
        # Users said it at the answer that went wrong: after the steps before it.
        at = min(max(step - 1, 0), len(steps))
        steps.insert(at, f"At step {step}, as users had to tell the agent: {said.text}")
    if not steps:
        return None
    tenants = sorted({t.tenant for t in guided or worked})
    return Skill(
        name=skill_name(task_type),
        description=_description(task_type, trajectories),
        steps=steps,
        tool_calls=[SkillCall(tool=tool, arguments=list(args)) for tool, args in sketch],
        tenants=tenants if len(tenants) == 1 else [],
        task_types=[task_type],
        provenance=[g.source for g in guidance][:50] + [str(t.id) for t in worked][:50],
    )


def _common_calls(
    trajectories: Sequence[TaskTrajectory],
) -> list[tuple[str, tuple[str, ...]]]:
    """The most common sequence of tools called (ties: the shorter, then the first seen),
    each with the argument names its calls set most often."""
    sequences = Counter(tuple(tool for tool, _ in t.calls) for t in trajectories)
    if not sequences:
        return []
    order = {sequence: i for i, sequence in reversed(list(enumerate(sequences)))}
    best = min(sequences, key=lambda s: (-sequences[s], len(s), order[s]))
    members = [t for t in trajectories if tuple(tool for tool, _ in t.calls) == best]
    return [
        (tool, Counter(t.calls[i][1] for t in members).most_common(1)[0][0])
        for i, tool in enumerate(best)
    ]


def _representative(guidance: Sequence[GuidanceTurn]) -> GuidanceTurn | None:
    """The guidance that shares most words with the rest (what most users said)."""
    if not guidance:
        return None
    bags = [set(tokenize(g.text)) for g in guidance]

    def overlap(i: int) -> float:
        return sum(len(bags[i] & bag) / (len(bags[i] | bag) or 1) for bag in bags)

    best = max(range(len(guidance)), key=lambda i: (overlap(i), -i))
    # One line of printable text: the step is read in a system message.
    text = " ".join(_CONTROL.sub(" ", guidance[best].text).split())[:_GUIDANCE_CHARS]
    return GuidanceTurn(guidance[best].step, text, guidance[best].source)


def _description(task_type: str, trajectories: Sequence[TaskTrajectory]) -> str:
    """The task type and the words most of its opening requests share: what a request of
    this task is matched by."""
    requests = [set(tokenize(t.request)) for t in trajectories if t.request]
    counts = Counter(term for terms in requests for term in terms if not _is_value(term))
    floor = max(1, round(_COMMON_SHARE * len(requests)))
    common = [term for term, n in counts.most_common() if n >= floor][:_DESCRIPTION_TERMS]
    return f"{task_type}: {' '.join(common)}" if common else task_type


def _is_value(term: str) -> bool:
    # Ids, amounts and dates differ per request; they would only match their own.
    return bool(re.search(r"\d", term))


def argument_names(arguments: str) -> tuple[str, ...]:
    """The argument names a recorded call set (none when its arguments are not an object)."""
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return ()
    return tuple(sorted(parsed)) if isinstance(parsed, dict) else ()
