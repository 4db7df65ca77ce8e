"""What the build activity runs of an operator: a reader of evidence, a plain proposal, and
for an operator whose proposal is stored, its writer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evolution.decision import DecisionRecord
from evolution.operators import Candidate
from evolution.window import WindowSpec
from registry import AgentVersion, Session

__all__ = ["Operator", "Reader"]

# (registry session, parent, decision, the decision's window) -> the operator's evidence
Reader = Callable[[Session, AgentVersion, DecisionRecord, WindowSpec], Any]


@dataclass(frozen=True)
class Operator:
    """An operator's halves, for the activity to run apart.

    Args:
        read: the evidence, read from the registry and nothing else.
        propose: (evidence, parent, decision) -> a Candidate, or what `write` records; a
            plain function of `evolution`, with no registry access of its own.
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
