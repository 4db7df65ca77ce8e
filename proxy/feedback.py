"""Rewards and agent-side events arriving after the fact: /v1/feedback and /v1/events.

Both name their target by trajectory, event or session, and both are tenant-checked: a
target of another tenant is "not found" (404), so ids cannot be probed.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from atdp import (
    BinaryValue,
    CategoricalValue,
    Event,
    EventKind,
    Observation,
    Outcome,
    ReplayClass,
    ReplayInfo,
    Reward,
    ScalarValue,
    ToolCall,
    ToolCallAction,
    UserAction,
)
from proxy.errors import GatewayError
from registry import NotFoundError

__all__ = ["EventReport", "FeedbackReport", "record_event", "record_feedback"]


class _Target(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    trajectory_id: uuid.UUID | None = None
    event_id: uuid.UUID | None = None
    session_id: str | None = Field(default=None, min_length=1, max_length=200)
    agent: str | None = None

    @model_validator(mode="after")
    def _has_target(self):
        if not (self.trajectory_id or self.event_id or self.session_id):
            raise ValueError("name the target: trajectory_id, event_id or session_id")
        return self


class FeedbackReport(_Target):
    """Explicit feedback: any of thumbs, score, category, critique, correction."""

    thumbs: Literal["up", "down"] | None = None
    score: float | None = None
    category: str | None = Field(default=None, min_length=1, max_length=200)
    category_score: float | None = None
    critique: str | None = None
    correction: str | None = None
    name: str = Field(default="user_feedback", min_length=1, max_length=200)

    @model_validator(mode="after")
    def _has_signal(self):
        if (
            self.thumbs is None
            and self.score is None
            and self.category is None
            and not self.correction
        ):
            raise ValueError("give at least one of thumbs, score, category or correction")
        return self


class ReportedOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    tool_return: Any = None
    error_class: str | None = None
    error_message: str | None = None
    exit_code: int | None = None
    success: bool | None = None
    user_action: UserAction | None = None


class ReportedToolCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = "agent-reported"
    name: str = Field(min_length=1)
    arguments: str = ""


class EventReport(_Target):
    """An event the agent reports: a tool it ran, a task outcome, an approval, a file op..."""

    kind: Literal[
        "tool_call",
        "task_outcome",
        "approval",
        "file_op",
        "browser_op",
        "retrieval",
        "memory_read",
        "memory_write",
    ]
    parent_event_id: uuid.UUID | None = None
    tool_call: ReportedToolCall | None = None
    outcome: ReportedOutcome | None = None
    data: dict[str, Any] | None = None
    side_effects: bool = Field(
        default=True, description="False if re-running it is harmless (replay may substitute it)."
    )


async def _locate(service, tenant: str, target: _Target) -> tuple[uuid.UUID, uuid.UUID | None]:
    """(trajectory id, event id) of the target, if `tenant` owns it; else 404."""
    try:
        return await service.recorder.locate(
            tenant,
            event_id=target.event_id,
            trajectory_id=target.trajectory_id,
            agent=target.agent,
            session=target.session_id,
        )
    except NotFoundError as error:
        raise _not_found(error.what, error.key) from None


def _not_found(what: str, key: object) -> GatewayError:
    return GatewayError(404, f"No {what} {key} for this tenant.", code=f"{what}_not_found")


async def record_feedback(service, tenant: str, report: FeedbackReport) -> list[Reward]:
    trajectory_id, event_id = await _locate(service, tenant, report)
    values: list[tuple[str, Any, str | None]] = []
    if report.thumbs is not None:
        values.append((report.name, BinaryValue(value=report.thumbs == "up"), report.critique))
    if report.score is not None:
        values.append((report.name, ScalarValue(value=report.score), report.critique))
    if report.category is not None:
        values.append(
            (
                report.name,
                CategoricalValue(value=report.category, score=report.category_score),
                report.critique,
            )
        )
    if report.correction:
        values.append(("correction", BinaryValue(value=False), report.correction))
    return await service.recorder.record_feedback(tenant, trajectory_id, event_id, values)


async def record_event(service, tenant: str, report: EventReport) -> Event:
    trajectory_id, _ = await _locate(service, tenant, report)
    return await service.recorder.record_reported(
        tenant,
        trajectory_id,
        EventKind(report.kind),
        parent_id=report.parent_event_id,
        observation=Observation(data=report.data) if report.data else None,
        action=ToolCallAction(call=ToolCall(**report.tool_call.model_dump()))
        if report.tool_call
        else None,
        outcome=Outcome(**report.outcome.model_dump()) if report.outcome else None,
        replay=ReplayInfo(
            replay_class=ReplayClass.NON_REPLAYABLE
            if report.side_effects
            else ReplayClass.APPROXIMATE,
            reason="reported by the agent; "
            + (
                "it had side effects outside a sandbox"
                if report.side_effects
                else "its output can be substituted"
            ),
        ),
    )
