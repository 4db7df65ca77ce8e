"""Pluggable scorers of a replayed trajectory, each a number in [0, 1] or no opinion (None).

Scorers are async so one that waits on a service (a model, a tool) has the same shape as the
rule checks. `score_replay` runs them and `combine` folds their opinions into one score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field

from atdp import Event, ToolCall
from evolution.memory.distil import states_fact
from evolution.replay.engine import SERVED_TOOLS, ReplayedTrajectory, ReplayStep, action_of

__all__ = [
    "RecordedOutcome",
    "ReplayScore",
    "RequiredFacts",
    "Scorer",
    "ScoringContext",
    "ToolCallsSucceeded",
    "ToolCallsValid",
    "combine",
    "score_replay",
]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ScoringContext(_Value):
    """What is known about the recorded trajectory beyond its events.

    Args:
        recorded_reward: the trajectory's effective reward, normalised by the caller to
            [0, 1]; preferred over `recorded_success` when both are given.
        recorded_success: whether the recorded trajectory succeeded (its outcome status).
        required_facts: facts a good answer must state, e.g. corrections users gave.
        asked_for: what users had to ask for after the first answer (what the agent then
            gave): a good first answer gives it unasked.
    """

    recorded_reward: float | None = Field(default=None, ge=0.0, le=1.0)
    recorded_success: bool | None = None
    required_facts: list[str] = Field(default_factory=list)
    asked_for: list[str] = Field(default_factory=list)


class ReplayScore(_Value):
    """Every scorer's opinion of one replay and the combined score (None: no opinion at all)."""

    trajectory_id: str
    scores: dict[str, float | None]
    combined: float | None


@runtime_checkable
class Scorer(Protocol):
    """Scores a replay in [0, 1]; None when the scorer has no opinion on this trajectory."""

    name: str

    async def score(
        self, replayed: ReplayedTrajectory, recorded: list[Event], context: ScoringContext
    ) -> float | None: ...


class RecordedOutcome:
    """The recorded outcome carries over when the replay reproduced every recorded action.

    A different path says nothing about how the recorded outcome would have changed.
    """

    name = "recorded_outcome"

    async def score(
        self, replayed: ReplayedTrajectory, recorded: list[Event], context: ScoringContext
    ) -> float | None:
        if not replayed.reproduced:
            return None
        if context.recorded_reward is not None:
            return context.recorded_reward
        if context.recorded_success is not None:
            return 1.0 if context.recorded_success else 0.0
        return None


class ToolCallsValid:
    """1.0 when every new tool call names an offered tool with schema-valid JSON arguments.

    The schema is the one the version presented (`SERVED_TOOLS` in the response, in the
    agent's names), else the one the agent offered in that step's request (Draft 2020-12).
    """

    name = "tool_calls_valid"

    async def score(
        self, replayed: ReplayedTrajectory, recorded: list[Event], context: ScoringContext
    ) -> float | None:
        checked = [
            _call_valid(call, _offered(step))
            for step in replayed.steps
            for call in action_of(step.response).tool_calls
        ]
        if not checked:
            return None
        return 1.0 if all(checked) else 0.0


def _offered(step: ReplayStep) -> dict[str, dict[str, Any] | None]:
    served = step.response.get(SERVED_TOOLS) or step.request.get("tools") or []
    tools = [tool.get("function") or {} for tool in served]
    return {function.get("name"): function.get("parameters") for function in tools}


def _call_valid(call: ToolCall, offered: dict[str, dict[str, Any] | None]) -> bool:
    if call.name not in offered:
        return False
    try:
        arguments = json.loads(call.arguments or "{}")
    except (json.JSONDecodeError, ValueError):
        return False
    schema = offered[call.name]
    if schema is None:
        return isinstance(arguments, dict)
    return Draft202012Validator(schema).is_valid(arguments)


class ToolCallsSucceeded:
    """The share of the replay's tool calls their tool accepted; None when no tool answered.

    A call answered by its recorded result (the version repeated it) counts as the recording
    says; a call off the recorded path counts only when the tenant's tool simulator answered
    it: a replay stopped at a divergence is judged up to there.
    """

    name = "tool_calls_succeeded"

    async def score(
        self, replayed: ReplayedTrajectory, recorded: list[Event], context: ScoringContext
    ) -> float | None:
        results = [result for step in replayed.steps for result in step.tool_results]
        if not results:
            return None
        return sum(result.error is None for result in results) / len(results)


class RequiredFacts:
    """The fraction of required facts the version stated before the user had to.

    A fact a user supplied in the conversation must appear in the answer given before the
    user's message that states it (later answers have it from the user); a fact given in
    feedback, in the final answer. "States" is `evolution.memory.distil.states_fact`: the
    fact's values, or most of its words, however the answer puts them.

    Facts given here are used for every trajectory; without them, the context's facts,
    and what users had to ask for (`ScoringContext.asked_for`), which the answer before
    the user's first follow-up must give.
    """

    name = "required_facts"

    def __init__(self, facts: Sequence[str] | None = None) -> None:
        self.facts = list(facts or [])

    async def score(
        self, replayed: ReplayedTrajectory, recorded: list[Event], context: ScoringContext
    ) -> float | None:
        facts = self.facts or context.required_facts
        asked = [] if self.facts else context.asked_for
        if not (facts or asked) or not replayed.steps:
            return None
        stated = [states_fact(answer_before(replayed, fact) or "", fact) for fact in facts]
        first = first_answer(replayed) or ""
        stated += [states_fact(first, wanted) for wanted in asked]
        return sum(stated) / len(stated)


def answer_before(replayed: ReplayedTrajectory, fact: str) -> str | None:
    """The last text the version said before any user message stating `fact`."""
    answer = None
    for step in replayed.steps:
        users = [_text(m) for m in step.request.get("messages") or [] if m.get("role") == "user"]
        if any(states_fact(text, fact) for text in users[1:]):
            break
        content = action_of(step.response).content
        if content and content.strip():
            answer = content
    return answer


def first_answer(replayed: ReplayedTrajectory) -> str | None:
    """The last text the version said before the user's first follow-up: its answer to the
    first request."""
    answer = None
    for step in replayed.steps:
        users = [m for m in step.request.get("messages") or [] if m.get("role") == "user"]
        if len(users) > 1:
            break
        content = action_of(step.response).content
        if content and content.strip():
            answer = content
    return answer


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def combine(scores: Iterable[float | None]) -> float | None:
    """The mean of the scorers that had an opinion; None when none had.

    An unweighted mean keeps every scorer's vote visible and in [0, 1]; a scorer without an
    opinion (None) neither helps nor hurts.
    """
    values = [score for score in scores if score is not None]
    return math.fsum(values) / len(values) if values else None


async def score_replay(
    replayed: ReplayedTrajectory,
    recorded: list[Event],
    scorers: Sequence[Scorer],
    context: ScoringContext | None = None,
) -> ReplayScore:
    """Run every scorer on one replay and combine their opinions."""
    names = [scorer.name for scorer in scorers]
    if len(set(names)) != len(names):
        raise ValueError(f"scorer names must be unique, got {names}")
    context = context or ScoringContext()
    scores: dict[str, float | None] = {}
    for scorer in scorers:
        value = await scorer.score(replayed, recorded, context)
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError(f"scorer {scorer.name} returned {value}; scores must be in [0, 1]")
        scores[scorer.name] = value
    return ReplayScore(
        trajectory_id=str(replayed.trajectory_id),
        scores=scores,
        combined=combine(scores.values()),
    )
