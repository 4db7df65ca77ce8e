"""Catalog changes, announced to the gateways that cache them.

A gateway caches aliases, keys, grants and tenant policies for `catalog_ttl` seconds, so
that its hot path does not read the registry on every request. On PostgreSQL every write
that changes one of them also announces it on its registry's channel (`pg_notify` in the
writing transaction, so it is delivered on commit and never for a rolled-back write), and a
gateway that listens (`ChangeListener`) drops the cached entry at once: a
promotion, a rollback, a revoked key or a changed policy takes effect within a round trip
instead of a TTL. The TTL remains the bound
wherever an announcement can be missed: while a gateway reconnects (it then drops its whole
cache), and on SQLite, which has no notifications.

Notifications are database-wide, and one database may hold several registries, one per
schema (a staging beside production, or each test's): the channel is named after the
schema the registry lives in (`CHANNEL` for `public`, as before), so a registry's gateways
hear only its own announcements.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from enum import StrEnum

import psycopg
import psycopg.sql
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlmodel import Session

from registry.db import libpq_conninfo

__all__ = ["CHANNEL", "Change", "ChangeListener", "announce", "listen"]

log = logging.getLogger(__name__)

CHANNEL = "evoplane_catalog"
# The channel of the registry in the connection's schema (`current_schema()`, the first of
# its search path that exists): `CHANNEL` for public, else a name of fixed length (a channel
# name has at most 63 bytes, a schema's too). Computed in SQL, by announcer and listener alike.
_CHANNEL_OF_SCHEMA = (
    f"CASE current_schema() WHEN 'public' THEN '{CHANNEL}' "
    f"ELSE '{CHANNEL}_' || left(md5(current_schema()), 16) END"
)


class Change(StrEnum):
    """What changed; an announcement is `<change>:<name>`."""

    ALIASES = "aliases"  # name: the agent
    GRANTS = "grants"  # name: the tenant
    KEYS = "keys"  # name: the key's id (gateways cache keys by the secret, so drop them all)
    POLICY = "policy"  # name: the tenant


def announce(session: Session, change: Change, name: str) -> None:
    """Announce `change` of `name` when the session's transaction commits (PostgreSQL only)."""
    if session.get_bind().dialect.name != "postgresql":
        return
    session.execute(
        sa.text(f"SELECT pg_notify({_CHANNEL_OF_SCHEMA}, :payload)"),
        {"payload": f"{change.value}:{name}"},
    )


def listen(connection: psycopg.Connection) -> str:
    """Listen on the channel of the registry this connection reaches; its name."""
    name = connection.execute(f"SELECT {_CHANNEL_OF_SCHEMA}").fetchone()[0]
    connection.execute(_listen(name))
    return name


def _listen(name: str) -> psycopg.sql.Composed:
    return psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(name))


def parse(payload: str) -> tuple[Change, str] | None:
    """(change, name) of an announcement; None for one this version does not know."""
    kind, _, name = payload.partition(":")
    try:
        return Change(kind), name
    except ValueError:
        return None


class ChangeListener:
    """Listens for catalog changes on a connection of its own and reports each one.

    Args:
        on_change: called with (change, name) for every announcement; None for one it does
            not know, which should be read as "anything may have changed".
        on_reset: called each time listening (re)starts, since announcements made while
            it was not listening are lost.
    """

    RETRY_S = (0.5, 1.0, 2.0, 5.0, 10.0)

    def __init__(
        self,
        conninfo: str,
        on_change: Callable[[tuple[Change, str] | None], None],
        on_reset: Callable[[], None],
        *,
        connect_timeout: int = 5,
    ) -> None:
        self._conninfo = conninfo
        self._on_change = on_change
        self._on_reset = on_reset
        self._connect_timeout = connect_timeout
        self.listening = asyncio.Event()

    @classmethod
    def for_engine(
        cls,
        engine: Engine,
        on_change: Callable[[tuple[Change, str] | None], None],
        on_reset: Callable[[], None],
    ) -> ChangeListener | None:
        """A listener on the engine's database; None for SQLite, which cannot notify."""
        conninfo = libpq_conninfo(engine)
        return cls(conninfo, on_change, on_reset) if conninfo is not None else None

    async def run(self) -> None:
        """Listen until cancelled, reconnecting (with backoff) whenever the connection fails."""
        failures = 0
        while True:
            try:
                connection = await psycopg.AsyncConnection.connect(
                    self._conninfo, autocommit=True, connect_timeout=self._connect_timeout
                )
            except psycopg.OperationalError as error:
                failures += 1
                delay = self.RETRY_S[min(failures, len(self.RETRY_S)) - 1]
                log.warning("catalog changes: cannot connect (%s); retrying in %.1fs", error, delay)
                await asyncio.sleep(delay)
                continue
            try:
                async with connection:
                    found = await connection.execute(f"SELECT {_CHANNEL_OF_SCHEMA}")
                    await connection.execute(_listen((await found.fetchone())[0]))
                    failures = 0
                    self._on_reset()
                    self.listening.set()
                    async for notify in connection.notifies():
                        self._on_change(parse(notify.payload))
            except psycopg.Error as error:
                log.warning("catalog changes: connection lost (%s); reconnecting", error)
            finally:
                self.listening.clear()
