"""What every operator is: a reader of evidence, a decision, and what the decision returns.

An operator proposes a change to one surface of the parent version: memory, harness, tool
schema or weights. It never modifies a version; it returns a new `VersionSpec` and says
what changed and why, so the gates, the evolution record and MLflow can show it to a
person. Its halves run apart, as Temporal's samples split activities from plain functions:
the activity reads the evidence in one short transaction, closes it, lets the operator
decide (hours, at worst: a DSPy optimisation), then writes in a transaction of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from atdp import VersionSpec
from evolution.decision import DecisionRecord
from evolution.window import WindowSpec
from registry import AgentVersion, Session

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


# (registry session, parent, decision, the decision's window) -> the operator's evidence
Reader = Callable[[Session, AgentVersion, DecisionRecord, WindowSpec], Any]


@dataclass(frozen=True)
class Operator:
    """An operator's halves, for the activity to run apart.

    Args:
        read: the evidence, read from the registry and nothing else.
        propose: (evidence, parent, decision) -> a Candidate, or what `write` records;
            no registry access of its own.
        write: (session, proposal) -> the Candidate, for operators whose proposal is
            stored (memory items); None when the proposal is the candidate.
    """

    read: Reader
    propose: Callable[[Any, AgentVersion, DecisionRecord], Any]
    write: Callable[[Session, Any], Candidate] | None = None

    def run(
        self, session: Session, parent: AgentVersion, decision: DecisionRecord, window: WindowSpec
    ) -> Candidate:
        """Read, propose and write in one session: for tests and scripts, where no
        transaction is held open for long."""
        proposal = self.propose(self.read(session, parent, decision, window), parent, decision)
        return proposal if self.write is None else self.write(session, proposal)
