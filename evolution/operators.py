"""What every operator returns: a candidate version spec and the evidence for it.

An operator reads the window (through the registry) and the decision, and proposes a
change to one surface of the parent version: memory, harness, tool schema or weights. It
never modifies a version; it returns a new `VersionSpec` and says what changed and why, so
the gates, the evolution record and MLflow can show it to a person.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session

from atdp import VersionSpec
from evolution.decision import DecisionRecord
from evolution.window import WindowSpec
from registry import AgentVersion

__all__ = ["Candidate", "Operator", "OperatorError"]


class Candidate(BaseModel):
    """A proposed version and its evidence.

    Args:
        spec: the candidate version spec (the parent's, with one surface changed).
        summary: one sentence for the Temporal UI and the evolution record.
        changes: each change in words ("added fact: returns are accepted for 30 days").
        evidence: what supports it (source event ids, counts, replay numbers), JSON-able.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec: VersionSpec
    summary: str
    changes: list[str] = Field(default_factory=list)
    evidence: dict[str, Any] = Field(default_factory=dict)


class OperatorError(ValueError):
    """The operator found nothing it could change for this decision (not retryable)."""


# session: the registry; parent: the version to change; decision: what to address;
# window: the traffic the decision was made on (for the operator's own evidence queries).
Operator = Callable[[Session, AgentVersion, DecisionRecord, WindowSpec], Candidate]
