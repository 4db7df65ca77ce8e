"""Session placements read back by the gateway's PostgreSQL reader (SessionRouteReader)."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from atdp import Harness, ModelRef, VersionSpec, utcnow
from registry import (
    DatabaseUnavailableError,
    SessionRoute,
    SessionRouteReader,
    create_agent,
    create_db_engine,
    create_tenant,
    get_session_route,
    route_session,
    transaction,
    upgrade,
)
from registry.db import libpq_conninfo
from tests.conftest import postgres_schema_url
from tests.support.tcp_proxy import TcpProxy


def _placement(tenant: str, session: str, replica: int) -> SessionRoute:
    return SessionRoute(
        agent="bot",
        tenant=tenant,
        session=session,
        version_id="bot@v1",
        alias="stable",
        replica=replica,
        created_at=utcnow() - timedelta(minutes=replica),
    )


@pytest.fixture
def placed(postgres_schema):
    """A PostgreSQL registry with three sessions placed, and the placements."""
    engine = create_db_engine(postgres_schema_url(postgres_schema))
    upgrade(engine)
    spec = VersionSpec(model=ModelRef(engine="openai", model="m"), harness=Harness())
    placements = [_placement("acme", "s1", 0), _placement("acme", "s2", 1)]
    placements.append(_placement("globex", "s1", 2))  # same session id, another tenant
    with transaction(engine) as session:
        for tenant in ("acme", "globex"):
            create_tenant(session, tenant)
        create_agent(session, "bot", spec, author="t")
        for placement in placements:
            route_session(session, placement)
    yield engine, placements
    engine.dispose()


@pytest.fixture
def proxied(placed):
    """The placed registry reached through a TCP proxy the test can cut or stall: an engine
    for it, the proxy, and the placements."""
    engine, placements = placed
    proxy = TcpProxy(("127.0.0.1", 5432))
    through = create_db_engine(engine.url.set(port=proxy.port), check=False)
    try:
        yield through, proxy, placements
    finally:
        through.dispose()
        proxy.close()


def run_then_close(reader: SessionRouteReader, scenario) -> Any:
    """Run `scenario()` (a coroutine function) on a new event loop, then close the reader."""

    async def run() -> Any:
        try:
            return await scenario()
        finally:
            await reader.aclose()

    return asyncio.run(run())


def test_placements_come_back_in_the_order_asked_and_none_for_new_sessions(placed) -> None:
    engine, placements = placed
    reader = SessionRouteReader.for_engine(engine)
    keys = [
        ("bot", "globex", "s1"),
        ("bot", "acme", "new"),
        ("bot", "acme", "s1"),
        ("bot", "acme", "s2"),
        ("other-bot", "acme", "s1"),
    ]

    async def read_twice() -> tuple[list, list]:
        # the second read runs the statement prepared by the first
        return await reader.read(keys), await reader.read(keys[2:3])

    first, second = run_then_close(reader, read_twice)
    assert first == [placements[2], None, placements[0], placements[1], None]
    assert second == [placements[0]]
    with transaction(engine) as session:  # the same as the registry's own read
        assert [get_session_route(session, *key) for key in keys] == first


def test_an_unreachable_database_is_reported_as_such_and_the_next_read_reconnects(
    proxied,
) -> None:
    engine, proxy, placements = proxied
    reader = SessionRouteReader.for_engine(engine)
    key = [("bot", "acme", "s1")]

    async def scenario() -> list:
        assert await reader.read(key) == [placements[0]]
        proxy.cut()  # the open connection breaks, and new ones are refused
        for _ in range(2):
            with pytest.raises(DatabaseUnavailableError):
                await reader.read(key)
        proxy.restore()
        return await reader.read(key)

    assert run_then_close(reader, scenario) == [placements[0]]


def test_a_database_that_does_not_answer_is_unreachable_after_the_timeout(proxied) -> None:
    """A partition or a paused server fails nothing: without a timeout of its own the read
    (and every placement waiting for it) would hang until the kernel gives up."""
    engine, proxy, placements = proxied
    reader = SessionRouteReader(libpq_conninfo(engine), timeout=0.5)
    key = [("bot", "acme", "s1")]

    async def scenario() -> list:
        assert await reader.read(key) == [placements[0]]
        proxy.stall()  # the open connection answers nothing, and new ones hang
        for _ in range(2):  # a query in flight, then a connection being opened
            started = time.monotonic()
            with pytest.raises(DatabaseUnavailableError, match="no answer"):
                await reader.read(key)
            # 0.5 s, then psycopg's request to cancel the query (at most 5 s + 5 s)
            assert time.monotonic() - started < 15
        proxy.restore()
        return await reader.read(key)

    assert run_then_close(reader, scenario) == [placements[0]]


def test_sqlite_registries_have_no_reader(tmp_path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    assert SessionRouteReader.for_engine(engine) is None
