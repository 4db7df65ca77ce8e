"""Session routes: a session's version and replica, chosen once and kept.

The first gateway to see a session records the choice; every gateway after that (and
every later request) reads it back, so a session never changes version mid-conversation,
even when the canary weight moves.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session

from atdp import utcnow
from registry.tables import SessionRouteRow
from registry.trajectories import _insert_ignoring_duplicates

__all__ = ["SessionRoute", "get_session_route", "route_session"]


class SessionRoute(BaseModel):
    agent: str
    session: str
    tenant: str
    version_id: str
    alias: str
    replica: int
    created_at: datetime


def get_session_route(
    session: Session, agent: str, tenant: str, session_id: str
) -> SessionRoute | None:
    row = session.get(SessionRouteRow, (agent, tenant, session_id))
    return SessionRoute.model_validate(row, from_attributes=True) if row else None


def route_session(session: Session, proposal: SessionRoute) -> SessionRoute:
    """Record `proposal` unless the session already has a route; return the route in force."""
    row = proposal.model_dump()
    row["created_at"] = row["created_at"] or utcnow()
    _insert_ignoring_duplicates(session, SessionRouteRow.__table__, [row], key="agent")
    route = get_session_route(session, proposal.agent, proposal.tenant, proposal.session)
    assert route is not None
    return route
