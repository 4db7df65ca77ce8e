"""Reading what a window's corrections are read from (`evolution.corrections`)."""

from __future__ import annotations

from evolution.corrections import CorrectionRecords
from evolution.window import WindowSpec, trajectory_window
from registry import (
    Session,
    conversation_turns,
    follow_up_turns,
    offered_tools,
    window_rewards,
    window_trajectories,
)

__all__ = ["correction_records"]


def correction_records(session: Session, spec: WindowSpec) -> CorrectionRecords:
    """The records of the window `spec` names that corrections are read from; read them
    with `CorrectionRecords.corrections`."""
    traffic = trajectory_window(spec)
    return CorrectionRecords(
        window_trajectories(session, traffic),
        window_rewards(session, traffic),
        offered_tools(session, traffic),
        follow_up_turns(session, traffic),
        conversation_turns(session, traffic),
    )
