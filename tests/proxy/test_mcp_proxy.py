"""The gateway's MCP proxy: the SDK's own client through `/mcp/{server}` to a real MCP
server, captured, overlaid, governed; refusals and failures are clear JSON-RPC errors."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sqlalchemy import text

from atdp import EventKind, Guardrails, ToolOverride, ToolSchemaOverlay
from proxy.config import GatewayConfig
from proxy.mcp.server import TOOL_BLOCKED, UPSTREAM_UNAVAILABLE
from registry import (
    TenantPolicy,
    add_mcp_server,
    allow_mcp_tenant,
    create_api_key,
    create_tenant,
    get_version,
    grant_agent,
    list_rewards,
    transaction,
    unseal_event,
)
from tests.conftest import postgres_schema_url
from tests.proxy.test_gateway_overlays import promote
from tests.proxy.test_gateway_sdk import LOOKUP, client, stored
from tests.support.gateway import GatewayServer
from tests.support.mcp_upstream import McpUpstream


@pytest.fixture
def registry_url(request, tmp_path) -> str:
    """SQLite, or PostgreSQL where a test is parametrized with it."""
    if getattr(request, "param", "sqlite") == "postgresql":
        return postgres_schema_url(request.getfixturevalue("postgres_schema"))
    return f"sqlite:///{tmp_path / 'registry.db'}"


both_registries = pytest.mark.parametrize("registry_url", ["sqlite", "postgresql"], indirect=True)


def mcp_url(server, name: str = "orders") -> str:
    return server.base_url.removesuffix("/v1") + f"/mcp/{name}"


def mcp_client(server, key: str, session: str | None = None, name: str = "orders") -> Client:
    headers = {"Authorization": f"Bearer {key}"}
    if session:
        headers["X-Session-Id"] = session
    http = httpx2.AsyncClient(headers=headers, timeout=10)
    return Client(streamable_http_client(mcp_url(server, name), http_client=http))


def run(coroutine):
    return asyncio.run(coroutine)


@both_registries
def test_the_sdk_client_lists_and_calls_through_the_proxy_and_is_captured(mcp_live, orders):
    server, engine, keys = mcp_live

    async def session():
        async with mcp_client(server, keys["acme"], "mcp-1") as mcp:
            listing = await mcp.list_tools()
            found = await mcp.call_tool("lookup_order", {"order_id": "A-17"})
            failed = await mcp.call_tool("refund", {"order_id": "A-17", "amount": -1})
            return listing, found, failed

    listing, found, failed = run(session())
    assert sorted(t.name for t in listing.tools) == ["lookup_order", "refund"]
    assert json.loads(found.content[0].text) == {"order_id": "A-17", "status": "shipped"}
    assert failed.is_error
    assert orders.received[0] == ("lookup_order", {"order_id": "A-17"})
    trajectory, events = stored(server, engine, "acme", "mcp-1")
    assert trajectory.agent == "support-bot"
    kinds = [e.kind for e in events]
    assert kinds == [EventKind.RETRIEVAL, EventKind.TOOL_CALL, EventKind.TOOL_CALL]
    listed, ok, bad = events
    assert {t.name for t in listed.observation.tools} == {"lookup_order", "refund"}
    assert ok.action.call.name == "lookup_order"
    assert json.loads(ok.action.call.arguments) == {"order_id": "A-17"}
    assert ok.outcome.success and ok.outcome.tool_return["status"] == "shipped"
    assert ok.metadata.latency_ms > 0
    assert ok.metadata.extra["mcp"] == {
        "server": "orders",
        "method": "tools/call",
        "read_only": True,
    }
    assert bad.outcome.success is False and bad.outcome.error_class
    assert "amount must be positive" in bad.outcome.error_message
    assert ok.metadata.agent_version_id == "support-bot@v1"


def test_a_call_the_model_asked_for_is_linked_to_its_llm_call(mcp_live, orders):
    server, engine, keys = mcp_live
    completion = client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        tools=[LOOKUP],
        messages=[{"role": "user", "content": 'call lookup_order with {"order_id": "B-2"}'}],
        extra_headers={"X-Session-Id": "linked-1"},
    )
    asked = completion.choices[0].message.tool_calls[0]

    async def call():
        async with mcp_client(server, keys["acme"], "linked-1") as mcp:
            return await mcp.call_tool("lookup_order", json.loads(asked.function.arguments))

    run(call())
    # The agent shows the model the result: recorded once, first-hand, by the proxy.
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        tools=[LOOKUP],
        messages=[
            {"role": "user", "content": 'call lookup_order with {"order_id": "B-2"}'},
            completion.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": asked.id, "content": '{"status": "shipped"}'},
        ],
        extra_headers={"X-Session-Id": "linked-1"},
    )
    _, events = stored(server, engine, "acme", "linked-1")
    llm = next(e for e in events if e.kind is EventKind.LLM_CALL)
    tools = [e for e in events if e.kind is EventKind.TOOL_CALL]
    assert len(tools) == 1
    assert tools[0].parent_id == llm.id and tools[0].action.call.id == asked.id


def test_a_failed_call_is_an_implicit_reward_on_the_llm_call_that_asked(mcp_live, orders):
    server, engine, keys = mcp_live
    refund = {
        "type": "function",
        "function": {"name": "refund", "parameters": {"type": "object", "properties": {}}},
    }
    completion = client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        tools=[refund],
        messages=[{"role": "user", "content": 'call refund with {"order_id": "C-3", "amount": 0}'}],
        extra_headers={"X-Session-Id": "reward-1"},
    )
    asked = completion.choices[0].message.tool_calls[0]

    async def call():
        async with mcp_client(server, keys["acme"], "reward-1") as mcp:
            return await mcp.call_tool("refund", json.loads(asked.function.arguments))

    assert run(call()).is_error
    _, events = stored(server, engine, "acme", "reward-1")
    llm = next(e for e in events if e.kind is EventKind.LLM_CALL)
    with transaction(engine) as session:
        rewards = list_rewards(session, "acme", trajectory_id=llm.trajectory_id)
    assert ("tool_success", llm.id, False) in [(r.name, r.event_id, r.value.value) for r in rewards]


@both_registries
def test_a_tool_schema_version_renames_a_parameter_for_the_client_only(mcp_live, orders):
    server, engine, keys = mcp_live
    with transaction(engine) as session:
        base = get_version(session, "support-bot@v1").spec
    spec = base.model_copy(
        update={
            "tools": ToolSchemaOverlay(
                tools={
                    "lookup_order": ToolOverride(
                        description="Look up an order; ids look like A-17.",
                        parameters={
                            "type": "object",
                            "properties": {"order": {"type": "string", "pattern": "^[A-Z]-\\d+$"}},
                            "required": ["order"],
                        },
                        argument_map={"order": "order_id"},
                    )
                }
            )
        }
    )
    promote(engine, spec)
    server.gateway.catalog.forget()

    async def session():
        async with mcp_client(server, keys["acme"], "renamed-1") as mcp:
            listing = await mcp.list_tools()
            result = await mcp.call_tool("lookup_order", {"order": "D-4"})
            return listing, result

    listing, result = run(session())
    tool = next(t for t in listing.tools if t.name == "lookup_order")
    assert list(tool.input_schema["properties"]) == ["order"]
    assert tool.description == "Look up an order; ids look like A-17."
    assert not result.is_error
    assert orders.received[-1] == ("lookup_order", {"order_id": "D-4"})
    _, events = stored(server, engine, "acme", "renamed-1")
    call = events[-1]
    assert json.loads(call.action.call.arguments) == {"order": "D-4"}
    assert call.metadata.extra["mcp"]["upstream_arguments"] == {"order_id": "D-4"}
    assert call.metadata.agent_version_id == "support-bot@v2"


def test_a_blocked_tool_is_not_listed_and_its_call_is_refused(mcp_live, orders):
    server, engine, keys = mcp_live
    with transaction(engine) as session:
        base = get_version(session, "support-bot@v1").spec
    promote(engine, base.model_copy(update={"guardrails": Guardrails(blocked_tools=["refund"])}))
    server.gateway.catalog.forget()

    async def session():
        async with mcp_client(server, keys["acme"], "blocked-1") as mcp:
            listing = await mcp.list_tools()
            with pytest.raises(MCPError) as refused:
                await mcp.call_tool("refund", {"order_id": "A-1", "amount": 5})
            return listing, refused.value

    listing, refused = run(session())
    assert [t.name for t in listing.tools] == ["lookup_order"]
    assert refused.code == TOOL_BLOCKED and "guardrails" in refused.message
    assert all(name != "refund" for name, _ in orders.received)
    _, events = stored(server, engine, "acme", "blocked-1")
    assert events[-1].outcome.error_class == "blocked_by_guardrail"


def test_other_tenants_and_unknown_keys_are_refused(mcp_live, orders):
    server, engine, keys = mcp_live
    url = mcp_url(server)
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {},
    }
    headers = {"Accept": "application/json, text/event-stream"}
    cases = [
        ({}, 401),
        ({"Authorization": "Bearer evp_nope"}, 401),
        ({"Authorization": f"Bearer {keys['globex']}"}, 403),  # the agent's, not the server's
        ({"Authorization": f"Bearer {keys['acme-limited']}"}, 403),  # key limited to another agent
    ]
    for extra, status in cases:
        response = httpx.post(url, json=initialize, headers={**headers, **extra}, timeout=10)
        assert response.status_code == status, response.text
        assert response.json()["error"]["message"]
    response = httpx.post(
        mcp_url(server, "nowhere"),
        json=initialize,
        headers={**headers, "Authorization": f"Bearer {keys['acme']}"},
        timeout=10,
    )
    assert response.status_code == 404

    async def as_globex():
        async with mcp_client(server, keys["globex"]) as mcp:
            await mcp.call_tool("lookup_order", {"order_id": "A-1"})

    with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport's error
        run(as_globex())
    assert orders.received == []
    server.flush()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM event")).scalar() == 0


def test_bad_json_rpc_gets_a_json_rpc_error_and_writes_nothing(mcp_live, orders):
    server, engine, keys = mcp_live
    headers = {
        "Authorization": f"Bearer {keys['acme']}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    for body in (b"{not json", b'{"hello": "world"}', b'{"jsonrpc": "2.0", "id": 1}'):
        response = httpx.post(mcp_url(server), content=body, headers=headers, timeout=10)
        assert 400 <= response.status_code < 500, response.text
        error = response.json()["error"]
        assert isinstance(error["code"], int) and error["message"]
    # Well-formed JSON-RPC whose params do not validate: refused before any handler runs.
    modern = {**headers, "Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    for params in ({"name": 5, "_meta": meta}, {"arguments": {}, "_meta": meta}):
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        response = httpx.post(mcp_url(server), json=call, headers=modern, timeout=10)
        error = response.json()["error"]
        assert error["code"] < 0 and error["message"] and response.json()["id"] == 7, response.text
    assert orders.received == []
    server.flush()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM event")).scalar() == 0


def _silent_port() -> tuple[socket.socket, int]:
    """A port that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    return listener, listener.getsockname()[1]


def test_a_dead_or_silent_upstream_is_a_clear_error_not_a_hang(mcp_live):
    server, engine, keys = mcp_live
    listener, silent = _silent_port()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    with transaction(engine) as session:
        add_mcp_server(
            session, "support-bot", "dead", url=f"http://127.0.0.1:{dead}/mcp", tenants=["acme"]
        )
        add_mcp_server(
            session, "support-bot", "silent", url=f"http://127.0.0.1:{silent}/mcp", tenants=["acme"]
        )

    async def call(name: str) -> MCPError:
        async with mcp_client(server, keys["acme"], f"{name}-1", name=name) as mcp:
            with pytest.raises(MCPError) as failed:
                await mcp.call_tool("lookup_order", {"order_id": "A-1"})
            return failed.value

    try:
        for name in ("dead", "silent"):
            started = time.monotonic()
            error = run(call(name))
            assert error.code == UPSTREAM_UNAVAILABLE and f"'{name}'" in error.message
            assert time.monotonic() - started < 8
    finally:
        listener.close()
    _, events = stored(server, engine, "acme", "dead-1")
    assert events[-1].outcome.error_class == "upstream_unavailable"


def test_an_mcp_session_cannot_be_used_with_another_tenants_key(mcp_live, orders):
    server, engine, keys = mcp_live
    with transaction(engine) as session:
        allow_mcp_tenant(session, "orders", "globex")
    server.gateway.catalog.forget()
    headers = {"Accept": "application/json, text/event-stream"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    }
    opened = httpx.post(
        mcp_url(server),
        json=initialize,
        headers={**headers, "Authorization": f"Bearer {keys['acme']}"},
        timeout=10,
    )
    assert opened.status_code == 200, opened.text
    session_id = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    session_headers = {
        **headers,
        "Mcp-Session-Id": session_id,
        "Mcp-Protocol-Version": "2025-11-25",
    }
    stolen = httpx.post(
        mcp_url(server),
        json=listing,
        headers={**session_headers, "Authorization": f"Bearer {keys['globex']}"},
        timeout=10,
    )
    assert stolen.status_code == 404 and stolen.json()["error"]["message"]
    own = httpx.post(
        mcp_url(server),
        json=listing,
        headers={**session_headers, "Authorization": f"Bearer {keys['acme']}"},
        timeout=10,
    )
    assert own.status_code == 200, own.text
    assert {t["name"] for t in own.json()["result"]["tools"]} == {"lookup_order", "refund"}


def test_a_body_over_the_gateways_limit_is_refused(mcp_live, orders):
    server, engine, keys = mcp_live
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "lookup_order", "arguments": {"order_id": "x" * (5 * 2**20)}},
    }
    response = httpx.post(
        mcp_url(server),
        json=call,
        headers={
            "Authorization": f"Bearer {keys['acme']}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=30,
    )
    assert response.status_code == 413
    assert orders.received == []


def test_a_call_the_upstream_does_not_answer_in_time_fails_and_the_next_one_works(
    world, registry_url, tmp_path
):
    engine, keys = world
    with McpUpstream(slow=True) as slow:
        with transaction(engine) as session:
            add_mcp_server(session, "support-bot", "slow", url=slow.url, tenants=["acme"])
        config = GatewayConfig(
            database_url=registry_url, spool_dir=tmp_path / "spool", mcp_timeout=1.5
        )
        with GatewayServer(config) as server:

            async def calls():
                async with mcp_client(server, keys["acme"], "slow-1", name="slow") as mcp:
                    started = time.monotonic()
                    with pytest.raises(MCPError) as failed:
                        await mcp.call_tool("wait", {"seconds": 30})
                    waited = time.monotonic() - started
                    after = await mcp.call_tool("wait", {"seconds": 0})
                    return failed.value, waited, after

            failed, waited, after = run(calls())
            _, events = stored(server, engine, "acme", "slow-1")
    assert failed.code == UPSTREAM_UNAVAILABLE and "did not answer in 1.5 s" in failed.message
    assert waited < 10
    assert not after.is_error and after.content[0].text == "done"
    calls = [e for e in events if e.kind is EventKind.TOOL_CALL]
    assert [e.outcome.error_class for e in calls] == ["upstream_unavailable", None]


def test_mcp_events_are_redacted_like_every_event(mcp_live, orders):
    server, engine, keys = mcp_live
    email = "jane.doe@example.com"

    async def call():
        async with mcp_client(server, keys["acme"], "redacted-1") as mcp:
            return await mcp.call_tool("lookup_order", {"order_id": email})

    result = run(call())
    assert email in result.content[0].text  # the agent is served the real answer
    assert orders.received == [("lookup_order", {"order_id": email})]
    _, events = stored(server, engine, "acme", "redacted-1")
    (event,) = [e for e in events if e.kind is EventKind.TOOL_CALL]
    stored_text = event.model_dump_json()
    assert email not in stored_text and "[REDACTED:" in stored_text
    assert event.governance.redaction == "redacted"


def test_a_tenant_that_seals_gets_the_raw_mcp_call_sealed(world, registry_url, tmp_path, orders):
    from cryptography.fernet import Fernet

    engine, _ = world
    with transaction(engine) as session:
        create_tenant(session, "vault", TenantPolicy(seal_raw=True, sealed_readers=["trainer"]))
        grant_agent(session, "vault", "support-bot")
        key = create_api_key(session, "vault").key
        add_mcp_server(session, "support-bot", "orders", url=orders.url, tenants=["vault"])
    seal_key = Fernet.generate_key().decode()
    config = GatewayConfig(database_url=registry_url, spool_dir=tmp_path / "s", seal_key=seal_key)
    email = "jane.doe@example.com"
    with GatewayServer(config) as server:

        async def call():
            async with mcp_client(server, key, "vault-mcp") as mcp:
                await mcp.call_tool("lookup_order", {"order_id": email})

        run(call())
        _, events = stored(server, engine, "vault", "vault-mcp")
    (event,) = [e for e in events if e.kind is EventKind.TOOL_CALL]
    assert email not in event.model_dump_json()
    assert event.governance.sealed_ref == f"sealed:{event.id}"
    with transaction(engine) as session:
        opened = unseal_event(session, "vault", event.id, key=seal_key, reader="trainer")
    assert json.loads(opened.action.call.arguments) == {"order_id": email}
