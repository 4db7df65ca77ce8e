"""What a code scorer is sent, how its answer is read, and the reward a reading becomes.

A scorer gets a trajectory as plain JSON (`scorer_input`) and answers with a score: a
number from 0 to 1, a bool, `{"value": ..., "critique": "..."}`, or None (no opinion). An
endpoint gets a batch, `{"agent", "scorer", "trajectories": [...]}`, and answers
`{"results": [{"trajectory_id": ..., "value": ..., "critique": ...}, ...]}`. Anything
else is a `ScorerOutputError` that says what was wrong and what a scorer should return.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from atdp import Event, EventKind, MessageAction, Reward, RewardSource, ScalarValue, ToolCallAction
from evolution.scorers.settings import ScorerSpec
from registry import WindowTrajectory

__all__ = [
    "ScoreReading",
    "ScorerOutputError",
    "read_batch",
    "read_score",
    "scorer_input",
    "scorer_reward",
]

_SHAPE = (
    "a scorer returns a number from 0 to 1, a bool, {'value': <that>, 'critique': '...'}, "
    "or None for no opinion"
)
_CRITIQUE_CHARS = 2000
_NAMESPACE = uuid.UUID("9d0e3b4c-5a1f-4e62-8c3b-2e20c0de5c0e")


class ScorerOutputError(ValueError):
    """A scorer answered something that is not a score."""


@dataclass(frozen=True)
class ScoreReading:
    """A scorer's answer for one trajectory: its value (None: no opinion) and why."""

    value: float | None
    critique: str | None = None


def read_score(raw: Any) -> ScoreReading:
    """One answer of a scorer, read; raises ScorerOutputError for anything else."""
    critique = None
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"value", "critique", "trajectory_id"}
        if unknown or "value" not in raw:
            raise ScorerOutputError(f"got a mapping with keys {sorted(raw)}; {_SHAPE}")
        critique = raw.get("critique")
        if critique is not None and not isinstance(critique, str):
            raise ScorerOutputError(f"a critique is text, got {type(critique).__name__}")
        raw = raw["value"]
    return ScoreReading(_value(raw), critique[:_CRITIQUE_CHARS] if critique else None)


def _value(raw: Any) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if not isinstance(raw, int | float):
        raise ScorerOutputError(f"got {type(raw).__name__} {raw!r}; {_SHAPE}")
    if not math.isfinite(raw) or not 0.0 <= raw <= 1.0:
        raise ScorerOutputError(f"got {raw!r}, outside 0 to 1; {_SHAPE}")
    return float(raw)


def read_batch(body: Any, trajectory_ids: Sequence[str]) -> dict[str, ScoreReading | str]:
    """An endpoint's answer to a batch: per trajectory id, its reading or why it has none.

    Raises:
        ScorerOutputError: the body is not `{"results": [...]}` at all.
    """
    results = body.get("results") if isinstance(body, Mapping) else None
    if not isinstance(results, list):
        raise ScorerOutputError(
            "an endpoint answers {'results': [{'trajectory_id': ..., 'value': ...}, ...]}; "
            f"got {str(body)[:200]}"
        )
    found: dict[str, ScoreReading | str] = {}
    for result in results:
        key = str(result.get("trajectory_id")) if isinstance(result, Mapping) else None
        if key not in trajectory_ids:
            continue  # an id it was not sent: ignored
        try:
            found[key] = read_score(result)
        except ScorerOutputError as error:
            found[key] = str(error)
    for missing in set(trajectory_ids) - set(found):
        found[missing] = "the endpoint returned no result for this trajectory"
    return found


def scorer_input(trajectory: WindowTrajectory, events: Sequence[Event]) -> dict[str, Any]:
    """A trajectory as a scorer sees it: who and what, the conversation's messages as the
    last call saw them with the final answer, and every tool call with its outcome."""
    calls = [e for e in events if e.kind is EventKind.LLM_CALL]
    last = calls[-1] if calls else None
    messages = [m.model_dump(mode="json", exclude_defaults=True) for m in _seen(last)]
    answer = last.action.content if last and isinstance(last.action, MessageAction) else None
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return {
        "trajectory_id": str(trajectory.id),
        "tenant": trajectory.tenant,
        "session": trajectory.session,
        "task_type": trajectory.task_type,
        "outcome": trajectory.outcome_status,
        "started_at": trajectory.started_at.isoformat(),
        "messages": messages,
        "answer": answer,
        "tool_calls": [_tool_call(e) for e in events if isinstance(e.action, ToolCallAction)],
    }


def _seen(call: Event | None) -> list:
    return list(call.observation.messages) if call and call.observation else []


def _tool_call(event: Event) -> dict[str, Any]:
    outcome = event.outcome
    return {
        "name": event.action.call.name,
        "arguments": event.action.call.arguments,
        "success": outcome.success if outcome else None,
        "error": (outcome.error_message or outcome.error_class) if outcome else None,
        "result": outcome.tool_return if outcome else None,
    }


def scorer_reward(
    spec: ScorerSpec, trajectory: WindowTrajectory, reading: ScoreReading, at: datetime
) -> Reward:
    """The reward a scored trajectory gets; its id is the scorer's and the trajectory's, so
    scoring again (a retried run) adds nothing."""
    return Reward(
        id=uuid.uuid5(_NAMESPACE, f"{spec.name}:{spec.reward_name}:{trajectory.id}"),
        tenant=trajectory.tenant,
        trajectory_id=trajectory.id,
        name=spec.reward_name,
        value=ScalarValue(value=reading.value),
        critique=reading.critique or f"code scorer {spec.name}",
        source=RewardSource(spec.source),
        confidence=spec.confidence,
        created_at=at,
    )
