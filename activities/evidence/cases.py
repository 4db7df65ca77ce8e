"""Reading the recorded cases a replay replays: the window's past failures and known
successes, with their events (`evolution.replay.cases` chooses them)."""

from __future__ import annotations

from collections.abc import Sequence

from activities.evidence.corrections import correction_records
from atdp import EventKind
from evolution.corrections import CorrectionRecords, UserCorrection
from evolution.replay import RecordedTrajectory
from evolution.replay.cases import case_verdicts, chosen_cases, recorded_trajectories
from evolution.window import WindowSpec
from registry import Session, trajectories_holding, trajectory_events

__all__ = ["cases_of", "recorded_cases"]


def recorded_cases(
    session: Session, window: WindowSpec, *, per_kind: int = 20
) -> list[RecordedTrajectory]:
    """Up to `per_kind` past failures and `per_kind` known successes, newest first."""
    records = correction_records(session, window)
    return cases_of(session, records, records.corrections(), per_kind=per_kind)


def cases_of(
    session: Session,
    records: CorrectionRecords,
    corrections: Sequence[UserCorrection],
    *,
    per_kind: int = 20,
) -> list[RecordedTrajectory]:
    """`recorded_cases` of a window whose records and corrections are read already: which
    trajectories hold an answer, then the chosen ones' events, one query each."""
    verdicts = case_verdicts(records.trajectories, records.rewards, corrections)
    ids = [verdict.trajectory.id for verdict in verdicts]
    chosen = chosen_cases(
        verdicts, trajectories_holding(session, ids, EventKind.LLM_CALL), per_kind
    )
    events = trajectory_events(session, [verdict.trajectory.id for verdict in chosen])
    return recorded_trajectories(chosen, events, corrections)
