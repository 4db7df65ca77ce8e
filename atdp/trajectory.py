"""The ATDP trajectory: one session's task, the versions in force, and how it ended."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Literal

from pydantic import AwareDatetime, Field, model_validator

from atdp._base import ATDP_VERSION, ATDPModel, Name, Text

__all__ = ["OutcomeStatus", "Trajectory", "TrajectoryOutcome", "VersionRefs"]


class VersionRefs(ATDPModel):
    """Ids of what served the trajectory: the agent version and each of its parts."""

    agent_version_id: Text | None = None
    model: Text | None = None
    harness: Text | None = None
    memory: Text | None = None
    tool_schema: Text | None = None
    guardrails: Text | None = None


class OutcomeStatus(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    ABANDONED = "abandoned"
    ERROR = "error"
    UNKNOWN = "unknown"


class TrajectoryOutcome(ATDPModel):
    status: OutcomeStatus
    detail: Text | None = None


class Trajectory(ATDPModel):
    """A typed sequence of events for one agent, tenant and session."""

    atdp_version: Literal["1.0"] = ATDP_VERSION
    id: uuid.UUID
    tenant: Name
    agent: Name
    session: Name
    task_type: Name | None = Field(default=None, description="Workload class, for drift/spread.")
    versions: VersionRefs = Field(default_factory=VersionRefs)
    started_at: AwareDatetime
    ended_at: AwareDatetime | None = None
    outcome: TrajectoryOutcome | None = None

    @model_validator(mode="after")
    def _ends_after_start(self) -> Trajectory:
        if self.ended_at is not None and self.ended_at < self.started_at:
            raise ValueError("ended_at is before started_at")
        return self
