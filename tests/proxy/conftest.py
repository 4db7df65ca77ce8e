"""Fixtures for gateway tests: a scripted upstream, a migrated registry, the live gateway."""

from __future__ import annotations

import logging

import pytest

from proxy.config import GatewayConfig
from registry import add_mcp_server, create_db_engine, transaction, upgrade
from tests.support.gateway import GatewayServer, seed_gateway_world
from tests.support.mcp_upstream import McpUpstream
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


@pytest.fixture
def orders():
    """A real MCP server (order tools) on loopback; what it received in `.received`."""
    logging.getLogger("mcp").setLevel(logging.ERROR)  # the SDK logs each request at INFO
    with McpUpstream() as server:
        yield server


@pytest.fixture
def mcp_live(world, registry_url, tmp_path, orders):
    """(server, registry engine, keys) with `orders` registered as support-bot's MCP server
    `orders`, for acme only."""
    engine, keys = world
    with transaction(engine) as session:
        add_mcp_server(session, "support-bot", "orders", url=orders.url, tenants=["acme"])
    config = GatewayConfig(
        database_url=registry_url,
        spool_dir=tmp_path / "spool",
        upstream_timeout=3.0,
        upstream_connect_timeout=2.0,
        mcp_timeout=2.0,
    )
    with GatewayServer(config) as server:
        yield server, engine, keys
