"""OpenAICompatEngine against a real OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest

from proxy.engines import OpenAICompatEngine, UpstreamError, UpstreamTimeout
from tests.support.upstream import ScriptedUpstream

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def chat(user: str, system: str | None = None, **extra: object) -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return {"model": "support-bot", "messages": messages} | extra


@pytest.fixture(scope="module")
def shared_upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as upstream:
        yield upstream


@pytest.fixture
def upstream(shared_upstream: ScriptedUpstream) -> ScriptedUpstream:
    shared_upstream.reset()
    return shared_upstream


@pytest.fixture
async def engine(upstream: ScriptedUpstream) -> AsyncIterator[OpenAICompatEngine]:
    engine = OpenAICompatEngine(
        upstream.base_url, "sk-test", connect_timeout=1, max_connections=4, retry_backoff=0.01
    )
    yield engine
    await engine.aclose()


async def collect(engine: OpenAICompatEngine, body: dict, timeout: float = 5) -> list[dict]:
    return [chunk async for chunk in engine.stream(body, model=None, timeout=timeout)]


async def test_complete_returns_the_upstream_reply(engine, upstream) -> None:
    body = chat("Where is my order?", system="Be brief.", n=2, seed=7)
    reply = await engine.complete(body, model=None, timeout=5)
    assert upstream.requests == [body]
    assert upstream.headers[0]["authorization"] == "Bearer sk-test"
    assert reply["object"] == "chat.completion"
    texts = [choice["message"]["content"] for choice in reply["choices"]]
    assert texts == [f"echo: Where is my order? (system: Be brief.) #{i}" for i in (0, 1)]
    assert reply["system_fingerprint"] == "fp_scripted_seed_7"
    assert reply["usage"]["total_tokens"] > reply["usage"]["completion_tokens"] > 0


async def test_model_overrides_the_agent_name(engine, upstream) -> None:
    body = chat("hi")
    reply = await engine.complete(body, model="qwen3-8b", timeout=5)
    assert upstream.requests[0]["model"] == reply["model"] == "qwen3-8b"
    assert body["model"] == "support-bot"  # the caller's body is left alone


async def test_stream_chunks_reassemble_into_the_full_text(engine, upstream) -> None:
    body = chat("tell me a story", stream_options={"include_usage": True})
    chunks = await collect(engine, body)
    assert upstream.requests[0]["stream"] is True
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "echo: tell me a story"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["completion_tokens"] == 5  # "echo: ", "tell ", "me ", "a ", "story"


async def test_complete_drops_stream_flags(engine, upstream) -> None:
    await engine.complete(chat("hi", stream=True, stream_options={}), model=None, timeout=5)
    assert "stream" not in upstream.requests[0] and "stream_options" not in upstream.requests[0]


async def test_tool_calls_pass_through(engine) -> None:
    body = chat('call get_weather with {"city": "Paris"}', tools=TOOLS)
    reply = await engine.complete(body, model=None, timeout=5)
    (call,) = reply["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city":"Paris"}'}
    assert reply["choices"][0]["finish_reason"] == "tool_calls"

    deltas = [c["choices"][0]["delta"] for c in await collect(engine, body) if c["choices"]]
    parts = [call for delta in deltas for call in delta.get("tool_calls", [])]
    assert parts[0]["function"]["name"] == "get_weather" and parts[0]["id"] == call["id"]
    assert json.loads("".join(p["function"]["arguments"] for p in parts)) == {"city": "Paris"}


async def test_logprobs_and_token_ids_pass_through(engine) -> None:
    body = chat("count the tokens", logprobs=True, top_logprobs=3)
    (choice,) = (await engine.complete(body, model=None, timeout=5))["choices"]
    entries = choice["logprobs"]["content"]
    assert "".join(entry["token"] for entry in entries) == choice["message"]["content"]
    assert all(len(entry["top_logprobs"]) == 3 for entry in entries)
    assert len(choice["token_ids"]) == len(entries)
    assert all(isinstance(token_id, int) for token_id in choice["token_ids"])

    streamed = [c["choices"][0] for c in await collect(engine, body) if c["choices"]]
    assert [i for part in streamed for i in part.get("token_ids", [])] == choice["token_ids"]


@pytest.mark.parametrize("status", [500, 429])
async def test_upstream_error_carries_status_and_message(engine, upstream, status) -> None:
    upstream.fail_next(status, "engine overloaded")
    with pytest.raises(UpstreamError) as raised:
        await engine.complete(chat("hi"), model=None, timeout=5)
    assert raised.value.status == status
    assert raised.value.message == "engine overloaded"
    assert raised.value.body["error"]["message"] == "engine overloaded"
    assert len(upstream.requests) == 1  # a response is never retried


async def test_stream_error_is_raised_before_any_chunk(engine, upstream) -> None:
    upstream.fail_next(503)
    with pytest.raises(UpstreamError) as raised:
        await collect(engine, chat("hi"))
    assert raised.value.status == 503


@pytest.mark.parametrize("streaming", [False, True])
async def test_hanging_upstream_times_out(engine, upstream, streaming) -> None:
    upstream.hang_next(seconds=10)
    start = time.monotonic()
    with pytest.raises(UpstreamTimeout):
        if streaming:
            await collect(engine, chat("hi"), timeout=0.3)
        else:
            await engine.complete(chat("hi"), model=None, timeout=0.3)
    assert time.monotonic() - start < 2
    assert len(upstream.requests) == 1  # a timeout after sending is never retried


async def test_dropped_connection_is_an_error_not_a_retry(engine, upstream) -> None:
    upstream.drop_next()
    with pytest.raises(UpstreamError) as raised:
        await engine.complete(chat("hi"), model=None, timeout=5)
    assert raised.value.status is None
    assert len(upstream.requests) == 1


async def test_refused_connection_is_retried_until_the_engine_is_up() -> None:
    upstream = ScriptedUpstream()  # port bound, not listening: connections are refused
    engine = OpenAICompatEngine(
        upstream.base_url, connect_timeout=1, max_connections=1, connect_retries=6
    )
    threading.Timer(0.2, upstream.start).start()
    try:
        reply = await engine.complete(chat("hi"), model=None, timeout=10)
    finally:
        await engine.aclose()
        upstream.stop()
    assert reply["choices"][0]["message"]["content"] == "echo: hi"
    assert len(upstream.requests) == 1


async def test_unreachable_engine_says_what_to_check() -> None:
    upstream = ScriptedUpstream()
    engine = OpenAICompatEngine(
        upstream.base_url, connect_timeout=1, max_connections=1, connect_retries=1
    )
    try:
        with pytest.raises(UpstreamError, match=r"could not connect .*2 attempt\(s\)"):
            await engine.complete(chat("hi"), model=None, timeout=5)
    finally:
        await engine.aclose()
        upstream.stop()


async def test_pooled_connections_are_reused(engine, upstream) -> None:
    for _ in range(5):
        await engine.complete(chat("hi"), model=None, timeout=5)
    assert upstream.connections == 1
    await asyncio.gather(*(engine.complete(chat("hi"), model=None, timeout=5) for _ in range(12)))
    assert upstream.connections <= 4  # max_connections
