"""The skill operator as the build activity runs it: the window's correction records, user
messages and tool calls read from the registry, then `evolution.skills.operator.propose_skill`."""

from __future__ import annotations

from functools import partial

from activities.evidence import correction_records
from activities.operators.operator import Operator
from atdp import EventKind
from evolution.corrections import CorrectionJudge
from evolution.decision import DecisionRecord
from evolution.skills.operator import SkillEvidence, propose_skill, skill_evidence
from evolution.window import WindowSpec, trajectory_window
from registry import AgentVersion, Session, window_events

__all__ = ["read_skill", "skill_operator"]


def read_skill(
    session: Session, parent: AgentVersion, decision: DecisionRecord, window: WindowSpec
) -> SkillEvidence:
    """The evidence: correction records, tool calls and opening requests of the window."""
    traffic = trajectory_window(window)
    return skill_evidence(
        correction_records(session, window),
        window_events(session, traffic, EventKind.USER_MESSAGE),
        window_events(session, traffic, EventKind.TOOL_CALL),
    )


def skill_operator(judge: CorrectionJudge | None = None) -> Operator:
    """The skill operator; `judge` reads corrections as the window analysis did."""
    return Operator(read=read_skill, propose=partial(propose_skill, judge=judge))
