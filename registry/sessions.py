"""Session routes: a session's version and replica, chosen once and kept.

The first gateway to see a session records the choice; every gateway after that (and
every later request) reads it back, so a session never changes version mid-conversation,
even when the canary weight moves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

import psycopg
from pydantic import BaseModel
from sqlalchemy.engine import Engine
from sqlmodel import Session

from atdp import utcnow
from registry.db import DatabaseUnavailableError, libpq_conninfo
from registry.tables import SessionRouteRow
from registry.trajectories import _insert_ignoring_duplicates

__all__ = ["SessionRoute", "SessionRouteReader", "get_session_route", "route_session"]


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


# Placements of many sessions in one round trip, the keys as three parallel arrays.
_ROUTES_OF = (
    "SELECT agent, session, tenant, version_id, alias, replica, created_at FROM session_route"
    " JOIN unnest(%s::text[], %s::text[], %s::text[]) AS wanted(agent, tenant, session)"
    " USING (agent, tenant, session)"
)


class SessionRouteReader:
    """Sessions' placements read from PostgreSQL on the event loop, for the gateway.

    A gateway reads the registry once for every session it has not seen. Through SQLAlchemy
    in a worker thread that read took about 0.5 ms of CPU, in a thread that holds the GIL
    while the event loop waits; one prepared statement on an asyncio psycopg connection
    takes about a tenth of that (benchmarks/RESULTS.md, "Gateway overhead after the capture
    rework"). Reads are serialised on the one connection: callers batch the sessions that
    start together into one `read`.

    A read, connecting included, that takes longer than `timeout` seconds counts as the
    registry unreachable: a partition or a paused server answers nothing, and fails nothing,
    until the kernel gives up on the connection many minutes later. (Ending it costs psycopg
    a few seconds more, to ask the server to cancel the query.)

    Only for PostgreSQL registries (`for_engine` returns None for SQLite).
    """

    def __init__(self, conninfo: str, *, timeout: float = 5.0) -> None:
        self._conninfo = conninfo
        self._timeout = timeout
        self._connection: psycopg.AsyncConnection | None = None

    @classmethod
    def for_engine(cls, engine: Engine, *, timeout: float = 5.0) -> SessionRouteReader | None:
        conninfo = libpq_conninfo(engine)
        return cls(conninfo, timeout=timeout) if conninfo is not None else None

    async def read(self, keys: Sequence[tuple[str, str, str]]) -> list[SessionRoute | None]:
        """The placement of each (agent, tenant, session), None where there is none.

        Raises DatabaseUnavailableError when PostgreSQL cannot be reached, or does not
        answer within `timeout` (the next read connects again)."""
        agents, tenants, sessions = (list(column) for column in zip(*keys, strict=True))
        try:
            async with asyncio.timeout(self._timeout):
                connection = await self._connect()
                cursor = await connection.execute(
                    _ROUTES_OF, (agents, tenants, sessions), prepare=True
                )
                rows = await cursor.fetchall()
        except TimeoutError:
            await self.aclose()
            raise DatabaseUnavailableError(
                f"reading session routes: no answer in {self._timeout:g} s"
            ) from None
        except psycopg.OperationalError as error:
            await self.aclose()
            raise DatabaseUnavailableError(f"reading session routes: {error}") from error
        found = {
            (row[0], row[2], row[1]): SessionRoute(
                agent=row[0],
                session=row[1],
                tenant=row[2],
                version_id=row[3],
                alias=row[4],
                replica=row[5],
                created_at=row[6],
            )
            for row in rows
        }
        return [found.get(tuple(key)) for key in keys]

    async def _connect(self) -> psycopg.AsyncConnection:
        if self._connection is None or self._connection.closed:
            self._connection = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, connect_timeout=max(1, round(self._timeout))
            )
        return self._connection

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await connection.close()
