"""The gateway's catalog cache when change announcements may have been missed."""

from __future__ import annotations

import asyncio
import time

import pytest

from proxy.catalog import Catalog, RegistryUnreachable
from registry import create_db_engine, create_tenant, transaction, update_tenant_policy, upgrade
from tests.conftest import postgres_schema_url
from tests.proxy.test_durability import via_proxy
from tests.support.tcp_proxy import TcpProxy


async def test_listening_again_refreshes_every_value_and_an_outage_still_finds_them(
    postgres_schema,
) -> None:
    """Announcements are lost while the change listener is down, so when it listens again
    every cached value is due a refresh (`expire`); dropping them instead (`forget`) left a
    registry that went down again at once with nothing to serve."""
    url = postgres_schema_url(postgres_schema)
    admin = create_db_engine(url)
    upgrade(admin)
    with transaction(admin) as session:
        create_tenant(session, "acme")
    proxy = TcpProxy(("127.0.0.1", 5432))
    engine = create_db_engine(via_proxy(url, proxy.port))
    catalog = Catalog(engine, ttl=3600.0)
    try:
        assert (await catalog.policy("acme")).retention_days is None
        with transaction(admin) as session:  # a change this gateway never heard of
            update_tenant_policy(session, "acme", {"retention_days": 5}, actor="ana")

        catalog.expire()
        assert (await catalog.policy("acme")).retention_days is None  # served while refreshing
        for _ in range(100):
            if (await catalog.policy("acme")).retention_days == 5:
                break
            await asyncio.sleep(0.05)
        assert (await catalog.policy("acme")).retention_days == 5

        proxy.cut()
        catalog.expire()
        for _ in range(3):  # the refreshes fail; the value known keeps serving
            assert (await catalog.policy("acme")).retention_days == 5
            await asyncio.sleep(0.05)
        catalog.forget()
        with pytest.raises(RegistryUnreachable):
            await catalog.policy("acme")
    finally:
        proxy.close()
        await catalog.aclose()
        engine.dispose()
        admin.dispose()


async def test_a_registry_that_does_not_answer_fails_a_miss_in_time_and_serves_every_hit(
    postgres_schema,
) -> None:
    """A paused or partitioned registry fails nothing by itself: a request that needs what
    is not cached gets RegistryUnreachable after the catalog's timeout, not the outage's
    length, and what is cached serves at once, however stale."""
    url = postgres_schema_url(postgres_schema)
    admin = create_db_engine(url)
    upgrade(admin)
    with transaction(admin) as session:
        for tenant in ("acme", "globex"):
            create_tenant(session, tenant)
    proxy = TcpProxy(("127.0.0.1", 5432))
    engine = create_db_engine(via_proxy(url, proxy.port))
    catalog = Catalog(engine, ttl=0.05, timeout=0.5)
    try:
        assert (await catalog.policy("acme")).retention_days is None
        proxy.stall()
        await asyncio.sleep(0.1)  # stale: each look-up below starts a refresh that hangs
        started = time.monotonic()
        for _ in range(3):
            assert (await catalog.policy("acme")).retention_days is None
        assert time.monotonic() - started < 1.0  # waiting for the timeout takes 0.5 s each
        with pytest.raises(RegistryUnreachable, match="no answer"):
            await catalog.policy("globex")
        assert time.monotonic() - started < 3.0
    finally:
        proxy.close()  # what the stall held flows on, and the hanging reads end
        await catalog.aclose()
        engine.dispose()
        admin.dispose()
