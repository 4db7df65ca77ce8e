"""What each code scorer made of each trajectory: scored (with the reward it became),
abstained (no opinion), or failed (with the error, retried on a later run).

A trajectory a scorer has scored or abstained on is never sent to it again; a failed one
is, until it has failed `max_attempts` times.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

import sqlalchemy as sa
from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import utcnow
from registry.tables import ScorerResultRow, TrajectoryRow
from registry.windows import TrajectoryWindow, WindowTrajectory, _select_window_trajectories

__all__ = [
    "ScorerResult",
    "ScorerSummary",
    "record_scorer_results",
    "scorer_summaries",
    "unscored_trajectories",
]


class ScorerResult(BaseModel):
    agent: str
    scorer: str
    trajectory_id: uuid.UUID
    tenant: str
    status: Literal["scored", "abstained", "failed"]
    value: float | None = None
    reward_id: uuid.UUID | None = None
    error: str | None = None


class ScorerSummary(BaseModel):
    """One scorer's results over all of an agent's traffic, and its latest error."""

    scorer: str
    scored: int
    abstained: int
    failed: int
    last_error: str | None
    last_error_at: datetime | None


def unscored_trajectories(
    session: Session,
    window: TrajectoryWindow,
    scorer: str,
    *,
    task_types: Sequence[str] | None = None,
    max_attempts: int = 3,
    limit: int = 100,
) -> list[WindowTrajectory]:
    """The window's newest trajectories `scorer` has not scored yet (nor given up on).

    Args:
        task_types: only trajectories of these task types (None: any).
    """
    done = select(ScorerResultRow.trajectory_id).where(
        ScorerResultRow.agent == window.agent,
        ScorerResultRow.scorer == scorer,
        ScorerResultRow.trajectory_id == TrajectoryRow.id,
        sa.or_(ScorerResultRow.status != "failed", ScorerResultRow.attempts >= max_attempts),
    )
    statement = _select_window_trajectories(window).where(~done.exists())
    if task_types is not None:
        statement = statement.where(TrajectoryRow.task_type.in_(list(task_types)))
    if window.last is None:
        statement = statement.order_by(TrajectoryRow.started_at.desc(), TrajectoryRow.id.desc())
    statement = statement.limit(limit)
    return [WindowTrajectory(**row._mapping) for row in session.execute(statement)]


def record_scorer_results(session: Session, results: Sequence[ScorerResult]) -> None:
    """Keep each result; a trajectory's earlier result for the scorer is replaced, and its
    attempts counted."""
    now = utcnow()
    for result in results:
        key = (result.agent, result.scorer, result.trajectory_id)
        row = session.get(ScorerResultRow, key)
        if row is None:
            row = ScorerResultRow(**result.model_dump(), attempts=0, updated_at=now)
        else:
            for field, value in result.model_dump().items():
                setattr(row, field, value)
        row.attempts += 1
        row.updated_at = now
        session.add(row)
    session.flush()


def scorer_summaries(session: Session, agent: str) -> list[ScorerSummary]:
    """Per scorer of the agent: how many trajectories each status holds, the last error."""
    counts = session.execute(
        select(ScorerResultRow.scorer, ScorerResultRow.status, sa.func.count())
        .where(ScorerResultRow.agent == agent)
        .group_by(ScorerResultRow.scorer, ScorerResultRow.status)
    ).all()
    summaries: dict[str, dict[str, int]] = {}
    for scorer, status, count in counts:
        summaries.setdefault(scorer, {})[status] = count
    found = []
    for scorer, by_status in sorted(summaries.items()):
        last = session.exec(
            select(ScorerResultRow)
            .where(
                ScorerResultRow.agent == agent,
                ScorerResultRow.scorer == scorer,
                ScorerResultRow.status == "failed",
            )
            .order_by(ScorerResultRow.updated_at.desc())
        ).first()
        found.append(
            ScorerSummary(
                scorer=scorer,
                scored=by_status.get("scored", 0),
                abstained=by_status.get("abstained", 0),
                failed=by_status.get("failed", 0),
                last_error=last.error if last else None,
                last_error_at=last.updated_at if last else None,
            )
        )
    return found
