"""Stdio both ways: an MCP server registered by command (`evoplane mcp add --command`), and
an MCP client that only spawns processes, through `evoplane mcp-bridge`."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from atdp import EventKind
from proxy.config import GatewayConfig
from tests.proxy.test_gateway_sdk import stored
from tests.support.gateway import GatewayServer

EVOPLANE = str(Path(sys.executable).parent / "evoplane")


def evoplane(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")}
    return subprocess.run(
        [EVOPLANE, *args], capture_output=True, text=True, env={**base, **env}, timeout=120
    )


@pytest.fixture(autouse=True)
def _quiet_sdk():
    logging.getLogger("mcp").setLevel(logging.ERROR)


def test_the_cli_registers_servers_and_says_what_is_wrong(world, registry_url) -> None:
    env = {"EVOPLANE_DATABASE_URL": registry_url}
    both = evoplane(
        "mcp", "add", "support-bot", "x", "--url", "http://h/mcp", "--command", "srv", "--tenant",
        "acme", env=env,
    )  # fmt: skip
    assert both.returncode != 0 and "exactly one of --url or --command" in both.stderr
    nobody = evoplane(
        "mcp", "add", "support-bot", "x", "--url", "http://h/mcp", "--tenant", "initech", env=env
    )
    assert nobody.returncode != 0 and "initech" in nobody.stderr + nobody.stdout
    added = evoplane(
        "mcp", "add", "support-bot", "tickets", "--url", "http://h/mcp", "--tenant", "acme", env=env
    )
    assert added.returncode == 0, added.stderr
    assert evoplane("mcp", "allow", "tickets", "--tenant", "globex", env=env).returncode == 0
    listed = evoplane("mcp", "list", env=env)
    assert "tickets" in listed.stdout and "acme, globex" in listed.stdout
    no_key = evoplane("mcp-bridge", "tickets", env=env)
    assert no_key.returncode != 0 and "EVOPLANE_API_KEY" in no_key.stderr


def test_a_spawning_client_reaches_a_stdio_server_through_the_bridge(
    world, registry_url, tmp_path
) -> None:
    engine, keys = world
    command = shlex.join([sys.executable, "-m", "tests.support.mcp_upstream", "--stdio"])
    added = evoplane(
        "mcp", "add", "support-bot", "orders", "--command", command, "--tenant", "acme",
        env={"EVOPLANE_DATABASE_URL": registry_url},
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    config = GatewayConfig(
        database_url=registry_url, spool_dir=tmp_path / "spool", upstream_connect_timeout=20.0
    )
    with GatewayServer(config) as server:
        bridge = StdioServerParameters(
            command=EVOPLANE,
            args=["mcp-bridge", "orders", "--gateway", server.base_url],
            env={
                "PATH": os.environ["PATH"],
                "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                "EVOPLANE_API_KEY": keys["acme"],
                "EVOPLANE_SESSION_ID": "bridged-1",
            },
        )

        async def session():
            async with Client(bridge) as mcp:
                listing = await mcp.list_tools()
                result = await mcp.call_tool("lookup_order", {"order_id": "E-5"})
                return listing, result

        listing, result = asyncio.run(session())
        assert sorted(t.name for t in listing.tools) == ["lookup_order", "refund"]
        assert json.loads(result.content[0].text)["order_id"] == "E-5"
        _, events = stored(server, engine, "acme", "bridged-1")
    assert [e.kind for e in events] == [EventKind.RETRIEVAL, EventKind.TOOL_CALL]
    assert events[-1].outcome.success and events[-1].metadata.extra["mcp"]["read_only"]
