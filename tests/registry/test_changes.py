"""Catalog changes announced on PostgreSQL, and the gateway-side listener that hears them."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from atdp import Harness, ModelRef, VersionSpec
from registry import (
    Alias,
    Change,
    ChangeListener,
    create_agent,
    create_api_key,
    create_db_engine,
    create_tenant,
    grant_agent,
    register_version,
    revoke_api_key,
    set_alias,
    transaction,
    upgrade,
)
from registry.changes import CHANNEL, listen, parse
from registry.db import libpq_conninfo
from tests.conftest import _own_schema, postgres_schema_url
from tests.support.tcp_proxy import TcpProxy

SPEC = VersionSpec(model=ModelRef(engine="openai", model="m"), harness=Harness())


@pytest.fixture
def registry(postgres_schema):
    engine = create_db_engine(postgres_schema_url(postgres_schema))
    upgrade(engine)
    with transaction(engine) as session:
        create_tenant(session, "acme")
        create_agent(session, "bot", SPEC, author="t")
        second = VersionSpec(model=SPEC.model, harness=Harness(instructions="Be brief."))
        register_version(session, "bot", second, parent_id="bot@v1", author="t", reason="t")
    yield engine
    engine.dispose()


def _heard(listening: psycopg.Connection, channel: str) -> list[str]:
    return [n.payload for n in listening.notifies(timeout=0.5) if n.channel == channel]


def test_changes_are_announced_when_their_transaction_commits(registry) -> None:
    with psycopg.connect(libpq_conninfo(registry), autocommit=True) as listening:
        channel = listen(listening)
        with transaction(registry) as session:
            set_alias(session, "bot", Alias.CANARY, "bot@v2", weight=0.5, actor="t")
            grant_agent(session, "acme", "bot")
            key = create_api_key(session, "acme")
            revoke_api_key(session, key.id)
            assert _heard(listening, channel) == []  # not before the commit
        assert _heard(listening, channel) == ["aliases:bot", "grants:acme", f"keys:{key.id}"]
        with pytest.raises(RuntimeError), transaction(registry) as session:
            set_alias(session, "bot", Alias.STABLE, "bot@v2", actor="t")
            raise RuntimeError("rolled back")
        assert _heard(listening, channel) == []  # a rolled-back move is never announced


def test_each_registry_in_one_database_hears_only_its_own_changes(registry, postgres_admin) -> None:
    """Two registries, each in a schema of one database: notifications are database-wide,
    so each registry announces on its schema's channel; `public` keeps `CHANNEL`."""
    schemas = _own_schema(postgres_admin)
    other = create_db_engine(postgres_schema_url(next(schemas)))
    upgrade(other)
    try:
        with (
            psycopg.connect(libpq_conninfo(registry), autocommit=True) as ours,
            psycopg.connect(libpq_conninfo(other), autocommit=True) as theirs,
            psycopg.connect(libpq_conninfo(postgres_admin), autocommit=True) as public,
        ):
            our_channel, their_channel = listen(ours), listen(theirs)
            assert listen(public) == CHANNEL  # the default schema's, as before
            assert len({our_channel, their_channel, CHANNEL}) == 3
            with transaction(registry) as session:
                grant_agent(session, "acme", "bot")
            assert _heard(ours, our_channel) == ["grants:acme"]
            assert [n.payload for n in theirs.notifies(timeout=0.5)] == []
            assert [n.payload for n in public.notifies(timeout=0.1)] == []
    finally:
        other.dispose()
        next(schemas, None)  # drops the other schema


def test_announcements_parse_back_and_unknown_ones_say_so() -> None:
    assert parse("aliases:support-bot") == (Change.ALIASES, "support-bot")
    assert parse("keys:3f2a") == (Change.KEYS, "3f2a")
    assert parse("policies:acme") is None
    assert parse("") is None


def test_the_listener_reports_changes_and_starts_over_after_losing_its_connection(
    registry,
) -> None:
    proxy = TcpProxy(("127.0.0.1", 5432))
    heard: list = []
    resets: list[int] = []
    listener = ChangeListener.for_engine(
        create_db_engine(registry.url.set(port=proxy.port), check=False),
        heard.append,
        lambda: resets.append(len(heard)),
    )
    assert listener is not None

    async def until(condition, seconds: float = 10.0) -> None:
        for _ in range(int(seconds / 0.05)):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError("timed out")

    def move(version: str) -> None:
        with transaction(registry) as session:
            set_alias(session, "bot", Alias.STABLE, version, actor="t")

    async def scenario() -> None:
        task = asyncio.create_task(listener.run())
        try:
            await asyncio.wait_for(listener.listening.wait(), 10)
            await asyncio.to_thread(move, "bot@v2")
            await until(lambda: heard == [(Change.ALIASES, "bot")])
            proxy.cut()  # the connection breaks; whatever is announced meanwhile is lost
            await until(lambda: not listener.listening.is_set())
            await asyncio.to_thread(move, "bot@v1")
            proxy.restore()
            await asyncio.wait_for(listener.listening.wait(), 10)
            await asyncio.to_thread(move, "bot@v2")
            await until(lambda: len(heard) == 2)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    try:
        asyncio.run(scenario())
    finally:
        proxy.close()
    # Each (re)start tells the cache to start over: the move made while cut off was missed.
    assert resets == [0, 1]
    assert heard == [(Change.ALIASES, "bot"), (Change.ALIASES, "bot")]


def test_sqlite_registries_have_no_listener(tmp_path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    assert ChangeListener.for_engine(engine, print, print) is None
