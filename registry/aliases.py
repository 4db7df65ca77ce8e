"""Aliases stable / canary / shadow / holdback, moved by appending to an immutable history.

A canary serves a candidate to a share of new sessions before it is promoted; a holdback
keeps a share of new sessions on the version a promotion replaced, so the promoted version
can be compared with it on the same traffic afterwards (a before/after comparison would
blame the version for any drift in the traffic that came with it).

"What served agent A at time t", "what changed and why" and "roll back to what" are all
queries over `alias_event`; nothing is ever overwritten.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import utcnow
from registry.changes import Change, announce
from registry.errors import InvalidRecordError, NotFoundError
from registry.tables import AgentRow, AgentVersionRow, AliasEventRow

__all__ = [
    "Alias",
    "AliasMove",
    "AliasState",
    "alias_history",
    "aliases_at",
    "current_aliases",
    "previous_stable",
    "set_alias",
]


class Alias(StrEnum):
    STABLE = "stable"
    CANARY = "canary"
    SHADOW = "shadow"
    HOLDBACK = "holdback"


class AliasMove(BaseModel):
    id: int
    agent: str
    alias: Alias
    version_id: str | None
    weight: float
    actor: str
    reason: str
    evolution_id: str | None
    at: datetime


class AliasState(BaseModel):
    """Which versions an agent's aliases point to at one moment."""

    stable: str | None = None
    canary: str | None = None
    canary_weight: float = 0.0
    shadow: str | None = None
    holdback: str | None = None
    holdback_weight: float = 0.0


_WEIGHTED = (Alias.CANARY, Alias.HOLDBACK)


def _move(row: AliasEventRow) -> AliasMove:
    return AliasMove.model_validate(row, from_attributes=True)


def set_alias(
    session: Session,
    agent: str,
    alias: Alias,
    version_id: str | None,
    *,
    weight: float | None = None,
    actor: str,
    reason: str = "",
    evolution_id: str | None = None,
    at: datetime | None = None,
) -> AliasMove:
    """Point `alias` at `version_id` (None clears canary, shadow or holdback) by appending
    a move.

    Args:
        weight: share of new sessions for a canary or a holdback, in (0, 1]; canary and
            holdback together may take at most all of them. Ignored for stable and shadow.
        at: when the move takes effect; defaults to now and may not precede the last move.
    """
    alias = Alias(alias)
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    if version_id is None and alias is Alias.STABLE:
        raise InvalidRecordError("stable cannot be cleared; point it at another version")
    if version_id is not None:
        version = session.get(AgentVersionRow, version_id)
        if version is None or version.agent != agent:
            raise InvalidRecordError(f"{version_id} is not a version of agent {agent}")
    if alias in _WEIGHTED and version_id is not None:
        if weight is None or not 0.0 < weight <= 1.0:
            raise InvalidRecordError(
                f"a {alias.value} needs a traffic weight in (0, 1], got {weight}"
            )
        state = aliases_at(session, agent, at or utcnow())
        other = state.holdback_weight if alias is Alias.CANARY else state.canary_weight
        if weight + other > 1.0:
            raise InvalidRecordError(
                f"canary and holdback would take {weight + other:.2f} of new sessions; "
                "together they may take at most all of them"
            )
    else:
        weight = 1.0 if version_id is not None else 0.0
    at = at or utcnow()
    last = _latest(session, agent, alias=None, at=None)
    if last is not None and at < last.at:
        raise InvalidRecordError(
            f"alias history is append-only: {at.isoformat()} precedes the last move "
            f"({last.at.isoformat()})"
        )
    row = AliasEventRow(
        agent=agent,
        alias=alias.value,
        version_id=version_id,
        weight=weight,
        actor=actor,
        reason=reason,
        evolution_id=evolution_id,
        at=at,
    )
    session.add(row)
    session.flush()
    announce(session, Change.ALIASES, agent)
    return _move(row)


def _latest(
    session: Session, agent: str, alias: Alias | None, at: datetime | None
) -> AliasEventRow | None:
    statement = select(AliasEventRow).where(AliasEventRow.agent == agent)
    if alias is not None:
        statement = statement.where(AliasEventRow.alias == alias.value)
    if at is not None:
        statement = statement.where(AliasEventRow.at <= at)
    statement = statement.order_by(AliasEventRow.at.desc(), AliasEventRow.id.desc()).limit(1)
    return session.exec(statement).first()


def aliases_at(session: Session, agent: str, at: datetime) -> AliasState:
    """The aliases of `agent` as they stood at time `at` (what served a request then)."""
    state = AliasState()
    for alias in Alias:
        row = _latest(session, agent, alias, at)
        if row is None or row.version_id is None:
            continue
        if alias is Alias.STABLE:
            state.stable = row.version_id
        elif alias is Alias.CANARY:
            state.canary, state.canary_weight = row.version_id, row.weight
        elif alias is Alias.HOLDBACK:
            state.holdback, state.holdback_weight = row.version_id, row.weight
        else:
            state.shadow = row.version_id
    return state


def current_aliases(session: Session, agent: str) -> AliasState:
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    return aliases_at(session, agent, utcnow())


def alias_history(session: Session, agent: str, alias: Alias | None = None) -> list[AliasMove]:
    """Every move, oldest first: the audit trail of what changed, when, by whom and why."""
    statement = select(AliasEventRow).where(AliasEventRow.agent == agent)
    if alias is not None:
        statement = statement.where(AliasEventRow.alias == Alias(alias).value)
    statement = statement.order_by(AliasEventRow.at, AliasEventRow.id)
    return [_move(row) for row in session.exec(statement)]


def previous_stable(session: Session, agent: str) -> str | None:
    """The version stable pointed at before the current one: the default rollback target."""
    moves = [move.version_id for move in alias_history(session, agent, Alias.STABLE)]
    if not moves:
        return None
    current = moves[-1]
    for version_id in reversed(moves[:-1]):
        if version_id != current:
            return version_id
    return None
