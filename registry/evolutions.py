"""Evolution records: the decision, the gate stages and the outcome of each evolution.

The Temporal workflow is the live state; this record is what stays queryable after the
workflow history is archived, and what links it to its MLflow run.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, Field
from sqlmodel import Session, select

from atdp import utcnow
from registry.errors import NotFoundError, RegistryError
from registry.tables import AgentRow, EvolutionRow

__all__ = [
    "EvolutionAlreadyRunning",
    "EvolutionRecord",
    "append_stage",
    "finish_evolution",
    "get_evolution",
    "list_evolutions",
    "running_evolution",
    "start_evolution",
    "update_evolution",
]


class EvolutionAlreadyRunning(RegistryError):
    """The agent has an unfinished evolution; one at a time per agent."""

    def __init__(self, agent: str, running: str) -> None:
        super().__init__(
            f"agent {agent} already has an evolution running ({running}); wait for it to "
            f"finish or abort it (`evoplane abort {running}`)"
        )
        self.agent, self.running = agent, running


class EvolutionRecord(BaseModel):
    id: str
    agent: str
    scope: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)
    action: str | None = None
    stage: str
    outcome: str | None = None
    decision: dict[str, Any] | None = None
    stages: list[dict[str, Any]] = Field(default_factory=list)
    parent_version_id: str | None = None
    candidate_version_id: str | None = None
    workflow_run_id: str | None = None
    mlflow_run_id: str | None = None
    created_at: datetime
    updated_at: datetime


_UPDATABLE = {
    "action",
    "stage",
    "outcome",
    "decision",
    "parent_version_id",
    "candidate_version_id",
    "workflow_run_id",
    "mlflow_run_id",
}


def _record(row: EvolutionRow) -> EvolutionRecord:
    record = EvolutionRecord.model_validate(row, from_attributes=True)
    return record.model_copy(update={"stages": [_as_read(stage) for stage in record.stages]})


def _as_read(stage: dict[str, Any]) -> dict[str, Any]:
    """A stage as read now: a gate stored when a skipped gate's verdict said `pass` says
    `skipped` (a skipped gate is not a pass)."""
    if stage.get("skipped") and stage.get("verdict") == "pass":
        return {**stage, "verdict": "skipped"}
    return stage


def start_evolution(
    session: Session,
    evolution_id: str,
    agent: str,
    *,
    scope: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    workflow_run_id: str | None = None,
) -> EvolutionRecord:
    """Create the record; starting the same id again returns the existing one."""
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    existing = session.get(EvolutionRow, evolution_id)
    if existing is not None:
        return _record(existing)
    running = running_evolution(session, agent)
    if running is not None:
        raise EvolutionAlreadyRunning(agent, running.id)
    now = utcnow()
    row = EvolutionRow(
        id=evolution_id,
        agent=agent,
        scope=scope or {},
        options=options or {},
        stage="started",
        workflow_run_id=workflow_run_id,
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    try:
        with session.begin_nested():  # the unique index decides a race between two starts
            session.flush()
    except sa.exc.IntegrityError:
        running = running_evolution(session, agent)
        raise EvolutionAlreadyRunning(agent, running.id if running else "?") from None
    return _record(row)


def running_evolution(session: Session, agent: str) -> EvolutionRecord | None:
    """The agent's unfinished evolution, if any."""
    statement = select(EvolutionRow).where(
        EvolutionRow.agent == agent, EvolutionRow.outcome.is_(None)
    )
    row = session.exec(statement).first()
    return _record(row) if row is not None else None


def finish_evolution(
    session: Session, evolution_id: str, outcome: str, *, stage: str = "done"
) -> EvolutionRecord:
    """Set the outcome once; finishing again with the same outcome is a no-op."""
    row = _row(session, evolution_id)
    if row.outcome is not None and row.outcome != outcome:
        raise ValueError(f"evolution {evolution_id} already finished as {row.outcome}")
    row.outcome, row.stage, row.updated_at = outcome, stage, utcnow()
    session.add(row)
    session.flush()
    return _record(row)


def _row(session: Session, evolution_id: str) -> EvolutionRow:
    row = session.get(EvolutionRow, evolution_id)
    if row is None:
        raise NotFoundError("evolution", evolution_id)
    return row


def update_evolution(session: Session, evolution_id: str, **changes: Any) -> EvolutionRecord:
    """Set any of: action, stage, outcome, decision, version ids, run ids."""
    unknown = set(changes) - _UPDATABLE
    if unknown:
        raise TypeError(f"cannot update {sorted(unknown)} of an evolution")
    row = _row(session, evolution_id)
    for field, value in changes.items():
        setattr(row, field, value)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return _record(row)


def append_stage(session: Session, evolution_id: str, result: dict[str, Any]) -> EvolutionRecord:
    """Append one gate or step result; the same result appended twice is kept once."""
    row = _row(session, evolution_id)
    if result not in row.stages:
        row.stages = [*row.stages, result]
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
    return _record(row)


def get_evolution(session: Session, evolution_id: str) -> EvolutionRecord:
    return _record(_row(session, evolution_id))


def list_evolutions(
    session: Session,
    *,
    agent: str | None = None,
    stage: str | None = None,
    outcome: str | None = None,
    limit: int = 100,
) -> list[EvolutionRecord]:
    """Newest first."""
    statement = select(EvolutionRow)
    if agent is not None:
        statement = statement.where(EvolutionRow.agent == agent)
    if stage is not None:
        statement = statement.where(EvolutionRow.stage == stage)
    if outcome is not None:
        statement = statement.where(EvolutionRow.outcome == outcome)
    statement = statement.order_by(EvolutionRow.created_at.desc()).limit(limit)
    return [_record(row) for row in session.exec(statement)]
