"""Fixtures for gateway tests: a scripted upstream, a migrated registry, the live gateway."""

from __future__ import annotations

import pytest

from proxy.config import GatewayConfig
from registry import create_db_engine, upgrade
from tests.support.gateway import GatewayServer, seed_gateway_world
from tests.support.upstream import ScriptedUpstream


@pytest.fixture
def upstream():
    with ScriptedUpstream() as server:
        yield server


@pytest.fixture
def registry_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'registry.db'}"


@pytest.fixture
def world(registry_url, upstream):
    engine = create_db_engine(registry_url)
    upgrade(engine)
    keys = seed_gateway_world(engine, upstream.base_url)
    yield engine, keys
    engine.dispose()


@pytest.fixture
def catalog_ttl() -> float:
    return 2.0


@pytest.fixture
def live(world, registry_url, catalog_ttl, tmp_path):
    """(server, registry engine, keys) with the gateway serving on loopback."""
    engine, keys = world
    config = GatewayConfig(
        database_url=registry_url,
        spool_dir=tmp_path / "spool",
        max_body_bytes=64 * 1024,
        upstream_timeout=3.0,
        catalog_ttl=catalog_ttl,
    )
    with GatewayServer(config) as server:
        yield server, engine, keys
