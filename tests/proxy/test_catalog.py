"""The gateway's catalog cache when change announcements may have been missed."""

from __future__ import annotations

import asyncio

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
