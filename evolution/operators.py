"""What every operator returns: a candidate version and its evidence, or why it has none.

An operator proposes a change to one surface of the parent version: memory, harness, tool
schema, skills or weights. It never modifies a version; it returns a new `VersionSpec` and
says what changed and why, so the gates, the evolution record and MLflow can show it to a
person. Its proposal is a plain function of the evidence (a value the activity reads from
the registry, `activities.operators`), the parent and the decision, as Temporal's samples
split activities from plain functions: the activity reads the evidence in one short
transaction, closes it, lets the operator decide (hours, at worst: a DSPy optimisation),
then writes in a transaction of its own.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from atdp import VersionSpec

__all__ = ["Candidate", "OperatorError"]


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
