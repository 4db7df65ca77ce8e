"""A 2026-07-28 `tools/call` answered by the gateway itself (`proxy.mcp.direct`): the same
reply and the same captured event as through the SDK's server; whatever it does not
serve reaches the SDK unchanged and is answered as before."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text

import proxy.mcp.server
from proxy.mcp.direct import read_direct_call
from proxy.mcp.forward import _reply
from tests.proxy.test_gateway_sdk import stored
from tests.proxy.test_mcp_proxy import mcp_url

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def tool_call(request_id: int, name: str, arguments: dict | None) -> dict:
    params = {"name": name, "_meta": META, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def headers(key: str, session: str | None = None, name: str = "lookup_order") -> dict:
    found = {
        "Authorization": f"Bearer {key}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "Mcp-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    return found | ({"X-Session-Id": session} if session else {})


async def _to_the_sdk(scope, receive, limit):
    return None, receive


def _as_compared(event) -> dict:
    """What a captured call says, less what differs between any two calls (ids, times)."""
    document = event.model_dump(mode="json")
    call = document["action"]["call"]
    return {
        "kind": document["kind"],
        "call": {"name": call["name"], "arguments": call["arguments"]},
        "outcome": document["outcome"],
        "extra": document["metadata"]["extra"],
        "version": document["metadata"]["agent_version_id"],
        "replay": document["replay"],
    }


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("lookup_order", {"order_id": "D-1"}),
        ("refund", {"order_id": "D-1", "amount": -1}),  # the tool's own error (isError)
        ("no_such_tool", {}),  # the server's JSON-RPC error
        ("lookup_order", None),  # the tool's arguments do not validate upstream
    ],
)
def test_the_direct_path_and_the_sdks_give_the_same_reply_and_event(
    mcp_live, orders, monkeypatch, name, arguments
):
    server, engine, keys = mcp_live
    call = tool_call(3, name, arguments)
    served: list = []

    async def reading(scope, receive, limit):
        read = await read_direct_call(scope, receive, limit)
        served.append(read[0])
        return read

    monkeypatch.setattr(proxy.mcp.server, "read_direct_call", reading)
    direct = httpx.post(
        mcp_url(server), json=call, headers=headers(keys["acme"], "direct-1", name), timeout=10
    )
    assert [c.params.name for c in served] == [name]
    monkeypatch.setattr(proxy.mcp.server, "read_direct_call", _to_the_sdk)
    through_sdk = httpx.post(
        mcp_url(server), json=call, headers=headers(keys["acme"], "sdk-1", name), timeout=10
    )
    assert direct.status_code == through_sdk.status_code
    assert direct.headers["content-type"] == through_sdk.headers["content-type"]
    assert direct.json() == through_sdk.json()
    assert direct.json()["id"] == 3
    (_, [by_direct]), (_, [by_sdk]) = (
        stored(server, engine, "acme", session) for session in ("direct-1", "sdk-1")
    )
    assert _as_compared(by_direct) == _as_compared(by_sdk)


def test_what_the_direct_path_does_not_serve_is_answered_by_the_sdk_and_writes_nothing(
    mcp_live, orders
):
    server, engine, keys = mcp_live
    good = tool_call(4, "lookup_order", {"order_id": "E-1"})
    acme = headers(keys["acme"])
    no_meta = {**good, "params": {"name": "lookup_order", "arguments": {"order_id": "E-1"}}}
    refused = [
        (good, {**acme, "Mcp-Name": "refund"}),  # a header that disagrees with the body
        (good, {**acme, "Mcp-Method": "tools/list"}),
        (no_meta, acme),  # no envelope
        ({**good, "jsonrpc": "1.0"}, acme),
        ({**good, "id": [4]}, acme),
        (good, {**acme, "Mcp-Session-Id": "not-a-session", "Mcp-Protocol-Version": "2025-11-25"}),
    ]
    for body, sent in refused:
        response = httpx.post(mcp_url(server), json=body, headers=sent, timeout=10)
        assert 400 <= response.status_code < 500, response.text
        error = response.json()["error"]
        assert isinstance(error["code"], int) and error["message"], response.text
    other = httpx.post(mcp_url(server), json=good, headers=headers(keys["globex"]), timeout=10)
    assert other.status_code == 403 and other.json()["error"]["message"]
    huge = tool_call(5, "lookup_order", {"order_id": "x" * (5 * 2**20)})
    assert httpx.post(mcp_url(server), json=huge, headers=acme, timeout=30).status_code == 413
    assert orders.received == []
    server.flush()
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM event")).scalar() == 0


def _scope(method: str = "POST", version: str = MODERN, name: str = "lookup_order") -> dict:
    sent = {**headers("k", name=name), "Mcp-Protocol-Version": version}
    return {
        "type": "http",
        "method": method,
        "path": "/mcp/orders",
        "headers": [(k.lower().encode(), v.encode()) for k, v in sent.items()],
    }


def _receiving(chunks: list[bytes]):
    messages = [
        {"type": "http.request", "body": chunk, "more_body": i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)
    ]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    return receive


async def _replayed(receive) -> bytes:
    body = b""
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return body
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@given(
    st.one_of(
        json_values,
        st.builds(
            tool_call,
            st.integers(),
            st.sampled_from(["lookup_order", "refund", ""]),
            st.none() | st.dictionaries(st.text(max_size=8), json_values, max_size=3) | json_values,
        ),
    ),
    st.integers(1, 4),
    st.integers(0, 1000),
)
def test_a_body_is_served_directly_only_when_well_formed_and_otherwise_replayed_whole(
    body, pieces, limit
):
    raw = json.dumps(body).encode()
    size = -(-len(raw) // pieces)
    chunks = [raw[i : i + size] for i in range(0, len(raw), size)] or [b""]

    async def read():
        named = body.get("params", {}).get("name") if isinstance(body, dict) else None
        scope = _scope(name=named if isinstance(named, str) else "lookup_order")
        call, receive = await read_direct_call(scope, _receiving(chunks), limit)
        return call, await _replayed(receive)

    call, replayed = asyncio.run(read())
    assert replayed == raw
    if call is not None:
        assert len(raw) <= limit
        assert body["method"] == "tools/call" and body["id"] == call.request_id
        assert call.params.name == body["params"]["name"]
        assert call.params.arguments == body["params"]["arguments"]


def test_only_posts_in_the_newest_protocol_are_read():
    call = json.dumps(tool_call(1, "lookup_order", {"order_id": "F-1"})).encode()

    async def read(scope):
        return (await read_direct_call(scope, _receiving([call]), 10_000))[0]

    assert asyncio.run(read(_scope())).params.arguments == {"order_id": "F-1"}
    assert asyncio.run(read(_scope(method="GET"))) is None
    assert asyncio.run(read(_scope(version="2025-11-25"))) is None


def test_an_upstream_reply_is_read_from_json_or_from_its_event_stream():
    reply = {"jsonrpc": "2.0", "id": 9, "result": {"content": []}}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}
    stream = f"data: {json.dumps(progress)}\n\n: ping\n\ndata: {json.dumps(reply)}\n\n"
    assert _reply(json.dumps(reply).encode(), "application/json", 9, 200) == reply
    assert _reply(stream.encode(), "text/event-stream", 9, 200) == reply
    with pytest.raises(aiohttp.ClientPayloadError, match="no reply"):
        _reply(f"data: {json.dumps(progress)}\n\n".encode(), "text/event-stream", 9, 200)
    with pytest.raises(aiohttp.ClientPayloadError, match="HTTP 502"):
        _reply(b"<html>bad gateway</html>", "text/html", 9, 502)
