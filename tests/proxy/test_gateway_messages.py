"""Anthropic's Messages API through the gateway, with the real `anthropic` SDK and
LangChain's `ChatAnthropic`: served by the chat-completions pipeline (harness, memory, tool
schemas apply), captured as the same ATDP events, errors in Anthropic's shape."""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import pytest

from atdp import EventKind, MemorySnapshot, ToolCallAction, protocol_request
from registry import MemoryKind, add_memory_item, transaction
from runtime.version.overlays import MEMORY_BLOCK_START
from tests.proxy.test_gateway_overlays import promote
from tests.proxy.test_gateway_responses import _renaming
from tests.proxy.test_gateway_sdk import stored

LOOKUP = {
    "name": "lookup_order",
    "description": "Look up an order",
    "input_schema": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}


def root(server) -> str:
    return server.base_url.removesuffix("/v1")


def claude(server, key: str, session: str | None = None) -> anthropic.Anthropic:
    headers = {"X-Session-Id": session} if session else None
    return anthropic.Anthropic(
        base_url=root(server), api_key=key, max_retries=0, default_headers=headers
    )


def test_a_message_applies_the_harness_and_is_captured_with_its_protocol(live, upstream):
    server, engine, keys = live
    raw = claude(server, keys["acme"], "msg-1").messages.with_raw_response.create(
        model="support-bot",
        max_tokens=64,
        system="Be brief.",
        messages=[{"role": "user", "content": "Where is my parcel?"}],
    )
    message = raw.parse()
    sent = upstream.requests[-1]
    assert sent["messages"][0] == {
        "role": "system",
        "content": "You are Acme's support agent.\n\nBe brief.",
    }
    assert sent["messages"][1] == {"role": "user", "content": "Where is my parcel?"}
    assert sent["max_tokens"] == 64
    assert message.id.startswith("msg_") and message.stop_reason == "end_turn"
    (block,) = message.content
    assert block.type == "text" and block.text.startswith("echo: Where is my parcel?")
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0

    _, events = stored(server, engine, "acme", "msg-1")
    assert [e.kind for e in events] == [EventKind.USER_MESSAGE, EventKind.LLM_CALL]
    llm = events[-1]
    assert str(llm.id) == raw.headers["x-evoplane-event-id"]
    assert llm.action.content == block.text
    name, request = protocol_request(llm.observation.data)
    assert name == "messages" and request["system"] == "Be brief."


def test_a_stream_sends_anthropics_events_in_order_and_is_captured(live) -> None:
    server, engine, keys = live
    sdk = claude(server, keys["acme"], "msg-stream")
    with sdk.messages.stream(
        model="support-bot",
        max_tokens=64,
        messages=[{"role": "user", "content": "Stream this please"}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_message()
    # The SDK adds its own `text` events beside the wire's content_block_delta ones.
    wire = [k for k in kinds if k not in {"text", "ping"}]
    assert wire[:2] == ["message_start", "content_block_start"]
    assert wire[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert final.content[0].text.startswith("echo: Stream this please")
    assert final.stop_reason == "end_turn"

    _, events = stored(server, engine, "acme", "msg-stream")
    assert events[-1].action.content == final.content[0].text
    assert protocol_request(events[-1].observation.data)[0] == "messages"


def test_a_tool_using_agent_over_several_turns(live, upstream) -> None:
    server, engine, keys = live
    sdk = claude(server, keys["acme"], "msg-tools")
    question = {"role": "user", "content": 'call lookup_order with {"order_id": "A-17"}'}
    first = sdk.messages.create(
        model="support-bot", max_tokens=64, tools=[LOOKUP], messages=[question]
    )
    assert first.stop_reason == "tool_use"
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert use.name == "lookup_order" and use.input == {"order_id": "A-17"}
    second = sdk.messages.create(
        model="support-bot",
        max_tokens=64,
        tools=[LOOKUP],
        messages=[
            question,
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "shipped"}],
            },
        ],
    )
    sent = upstream.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == use.id
    assert sent[-1] == {"role": "tool", "tool_call_id": use.id, "content": "shipped"}
    assert second.content[0].type == "text"

    _, events = stored(server, engine, "acme", "msg-tools")
    assert [e.kind for e in events] == [
        EventKind.USER_MESSAGE,
        EventKind.LLM_CALL,
        EventKind.TOOL_CALL,
        EventKind.LLM_CALL,
    ]
    tool = events[2]
    assert isinstance(tool.action, ToolCallAction) and tool.action.call.id == use.id
    assert tool.outcome.success is True


def test_a_failed_tool_result_is_recorded_as_a_failure(live) -> None:
    server, engine, keys = live
    sdk = claude(server, keys["acme"], "msg-tool-error")
    question = {"role": "user", "content": 'call lookup_order with {"order_id": "x"}'}
    first = sdk.messages.create(
        model="support-bot", max_tokens=64, tools=[LOOKUP], messages=[question]
    )
    use = first.content[-1]
    error = {"type": "tool_result", "tool_use_id": use.id, "content": "bad id", "is_error": True}
    sdk.messages.create(
        model="support-bot",
        max_tokens=64,
        tools=[LOOKUP],
        messages=[
            question,
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [error]},
        ],
    )
    _, events = stored(server, engine, "acme", "msg-tool-error")
    (tool,) = [e for e in events if e.kind is EventKind.TOOL_CALL]
    assert tool.outcome.success is False


@pytest.mark.parametrize("streamed", [False, True])
def test_overlays_apply_renamed_arguments_come_back_and_memory_is_injected(
    live, upstream, streamed
) -> None:
    server, engine, keys = live
    with transaction(engine) as session:
        fact = add_memory_item(
            session, "support-bot", "acme", MemoryKind.FACT, "Parcels to Oslo leave on Mondays."
        )
    spec = _renaming(upstream).model_copy(
        update={"memory": MemorySnapshot(item_ids=[str(fact.id)], top_k=1)}
    )
    promote(engine, spec)
    server.gateway.catalog.forget()
    sdk = claude(server, keys["acme"])
    request = {
        "model": "support-bot",
        "max_tokens": 64,
        "tools": [LOOKUP],
        "messages": [{"role": "user", "content": 'Oslo? call lookup_order with {"id": "A-9"}'}],
    }
    if streamed:
        with sdk.messages.stream(**request) as stream:
            message = stream.get_final_message()
    else:
        message = sdk.messages.create(**request)
    sent = upstream.requests[-1]
    system = [m["content"] for m in sent["messages"] if m["role"] == "system"]
    assert system[0] == "House rules."
    assert MEMORY_BLOCK_START in system[1] and "Oslo leave on Mondays" in system[1]
    assert list(sent["tools"][0]["function"]["parameters"]["properties"]) == ["id"]
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert use.input == {"order_id": "A-9"}  # the agent's own argument name


def test_count_tokens_counts_what_the_model_reads(live) -> None:
    server, _, keys = live
    sdk = claude(server, keys["acme"])
    request = {
        "model": "support-bot",
        "messages": [{"role": "user", "content": "How many tokens is this question?"}],
    }
    counted = sdk.messages.count_tokens(**request)
    served = sdk.messages.create(max_tokens=16, **request)
    assert counted.input_tokens == served.usage.input_tokens > 0


def test_errors_are_anthropics_shape(live) -> None:
    server, _, keys = live
    with pytest.raises(anthropic.AuthenticationError):
        claude(server, "wrong-key").messages.create(
            model="support-bot", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(anthropic.NotFoundError):
        claude(server, keys["acme"]).messages.create(
            model="no-such-agent", max_tokens=8, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(anthropic.BadRequestError, match="web_search"):
        claude(server, keys["acme"]).messages.create(
            model="support-bot",
            max_tokens=8,
            tools=[{"type": "web_search_20250305", "name": "web_search"}],
            messages=[{"role": "user", "content": "hi"}],
        )
    reply = httpx.post(
        f"{root(server)}/v1/messages",
        headers={"x-api-key": keys["acme"], "anthropic-version": "2023-06-01"},
        json={"model": "support-bot", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert reply.status_code == 400
    assert reply.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": reply.json()["error"]["message"]},
    }
    assert "max_tokens" in reply.json()["error"]["message"]


def test_models_are_listed_in_anthropics_shape(live) -> None:
    server, _, keys = live
    models = claude(server, keys["acme"]).models.list()
    assert [m.id for m in models.data] == ["support-bot"]
    assert models.data[0].type == "model"


def test_langchain_chat_anthropic_through_the_gateway(live, upstream) -> None:
    from langchain_anthropic import ChatAnthropic

    server, engine, keys = live
    model = ChatAnthropic(
        model="support-bot",
        base_url=root(server),
        api_key=keys["acme"],
        max_tokens=64,
        max_retries=0,
        default_headers={"X-Session-Id": "langchain-1"},
    )
    answer = model.invoke("Where is my parcel?")
    assert answer.content.startswith("echo: Where is my parcel?")
    bound = model.bind_tools([LOOKUP])
    called = bound.invoke('call lookup_order with {"order_id": "C-3"}')
    assert called.tool_calls[0]["name"] == "lookup_order"
    assert called.tool_calls[0]["args"] == {"order_id": "C-3"}
    _, events = stored(server, engine, "acme", "langchain-1")
    llm_calls = [e for e in events if e.kind is EventKind.LLM_CALL]
    assert len(llm_calls) == 2
    assert all(protocol_request(e.observation.data)[0] == "messages" for e in llm_calls)


async def test_replay_serves_the_agents_own_request_in_its_protocol(live, upstream) -> None:
    """A trajectory recorded over /v1/messages replays deterministically from the agent's
    own Messages request, translated as the gateway translates it."""
    from activities.replay_gate import ReplayGate
    from evolution.replay import AGENT_PROTOCOL, replay_trajectory
    from registry import current_aliases, get_version

    server, engine, keys = live
    request = {
        "model": "support-bot",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Where is my parcel?"}],
    }
    await asyncio.to_thread(claude(server, keys["acme"], "msg-replay").messages.create, **request)
    _, events = stored(server, engine, "acme", "msg-replay")
    recorded = upstream.requests[-1]
    with transaction(engine) as session:
        version = get_version(session, current_aliases(session, "support-bot").stable)
    gate = ReplayGate(engine, timeout=10)
    try:
        replayed = await replay_trajectory(
            events, gate.serve(version, "acme"), mode="deterministic"
        )
        (step,) = replayed.steps
        assert step.request[AGENT_PROTOCOL] == {"protocol": "messages", "request": request}
        assert step.matched  # the same answer as recorded
        assert upstream.requests[-1]["messages"] == recorded["messages"]
        # What is served is the protocol request, not the chat body beside it.
        altered = {**step.request, "messages": [{"role": "user", "content": "Something else"}]}
        await gate.serve(version, "acme")(altered)
        assert upstream.requests[-1]["messages"] == recorded["messages"]
    finally:
        await gate.aclose()
