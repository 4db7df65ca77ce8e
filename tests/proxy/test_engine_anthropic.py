"""The `anthropic` engine: a version served by a Messages API upstream (Claude), for agents
on any of the gateway's protocols, whole and streamed, with the version's overlays."""

from __future__ import annotations

import json
from contextlib import contextmanager

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from atdp import Harness, ModelRef, ToolOverride, ToolSchemaOverlay, VersionSpec
from proxy.config import GatewayConfig
from proxy.engines.anthropic import chat_completion, messages_request
from proxy.protocols.messages import MessageContext, chat_request, message_object
from registry import create_db_engine, upgrade
from tests.proxy.test_gateway_sdk import LOOKUP, client, stored
from tests.support.gateway import GatewayServer, seed_gateway_world
from tests.support.protocol_upstreams import AnthropicUpstream


@contextmanager
def served_by(tmp_path, upstream, engine_kind: str, model: str):
    """The gateway on loopback, its support-bot served by `upstream` through the engine
    `engine_kind`, with a harness and a renamed tool argument: (server, registry, keys)."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    engine = create_db_engine(url)
    upgrade(engine)
    spec = VersionSpec(
        model=ModelRef(engine=engine_kind, base_url=upstream.base_url, model=model),
        harness=Harness(instructions="You are Acme's support agent."),
        tools=ToolSchemaOverlay(
            tools={"lookup_order": ToolOverride(argument_map={"id": "order_id"})}
        ),
    )
    keys = seed_gateway_world(engine, upstream.base_url, spec)
    config = GatewayConfig(
        database_url=url, spool_dir=tmp_path / "spool", upstream_api_key=upstream.api_key
    )
    try:
        with GatewayServer(config) as server:
            yield server, engine, keys
    finally:
        engine.dispose()


def tool_call(sdk, question: dict, session: str, streamed: bool) -> tuple[str, str]:
    """(arguments, id) of the tool call the model answers `question` with."""
    request = {
        "model": "support-bot",
        "messages": [question],
        "tools": [LOOKUP],
        "extra_headers": {"X-Session-Id": session},
    }
    if streamed:
        chunks = list(sdk.chat.completions.create(stream=True, **request))
        calls = [c for chunk in chunks for c in chunk.choices[0].delta.tool_calls or []]
        return "".join(c.function.arguments or "" for c in calls), next(c.id for c in calls if c.id)
    (call,) = sdk.chat.completions.create(**request).choices[0].message.tool_calls
    return call.function.arguments, call.id


def tool_result(sdk, question: dict, session: str, call_id: str, arguments: str, result: str):
    """The model's answer once the call (`call_id`, `arguments`) returned `result`."""
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "lookup_order", "arguments": arguments},
    }
    return sdk.chat.completions.create(
        model="support-bot",
        tools=[LOOKUP],
        messages=[
            question,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
        ],
        extra_headers={"X-Session-Id": session},
    )


@pytest.fixture
def claude_live(tmp_path):
    with AnthropicUpstream(api_key="sk-ant-test") as upstream:
        with served_by(tmp_path, upstream, "anthropic", "claude-test") as live:
            yield *live, upstream


@pytest.mark.parametrize("streamed", [False, True])
def test_a_chat_agent_is_served_by_a_messages_upstream(claude_live, streamed) -> None:
    server, engine, keys, upstream = claude_live
    sdk = client(server, keys["acme"])
    question = {"role": "user", "content": 'Where? call lookup_order with {"id": "A-17"}'}
    session = f"claude-{streamed}"
    arguments, call_id = tool_call(sdk, question, session, streamed)
    sent = upstream.requests[-1]
    assert sent["system"] == "You are Acme's support agent."
    assert sent["model"] == "claude-test" and sent["max_tokens"] > 0
    assert sent["tools"][0]["name"] == "lookup_order"
    assert list(sent["tools"][0]["input_schema"]["properties"]) == ["order_id"]
    assert json.loads(arguments) == {"order_id": "A-17"}  # the model's `id`, mapped back

    # The tool's result goes back as a user turn of tool_result blocks.
    done = tool_result(sdk, question, session, call_id, arguments, "shipped")
    turns = upstream.requests[-1]["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"][0] == {
        "type": "tool_use",
        "id": call_id,
        "name": "lookup_order",
        "input": {"id": "A-17"},  # the model's own argument name, as the version shows it
    }
    assert turns[2]["content"] == [
        {"type": "tool_result", "tool_use_id": call_id, "content": "shipped"}
    ]
    assert done.choices[0].message.content.startswith("echo:")
    _, events = stored(server, engine, "acme", session)
    llm = [e for e in events if e.kind.value == "llm_call"]
    assert llm[0].metadata.tokens.prompt > 0 and llm[-1].action.content.startswith("echo:")


def test_an_upstream_refusal_is_the_agents_error(claude_live) -> None:
    server, _, keys, upstream = claude_live
    upstream.api_key = "another-key"
    with pytest.raises(openai.APIStatusError) as error:
        client(server, keys["acme"]).chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "hi"}]
        )
    assert error.value.status_code == 502 and "invalid x-api-key" in str(error.value)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30)
_call_ids = st.text("abcdef0123456789", min_size=4, max_size=8).map(lambda s: f"toolu_{s}")


@st.composite
def chats(draw) -> dict:
    """Chat requests as a version sends them: a system prompt, then turns, tool calls
    answered by tool messages."""
    messages = [{"role": "system", "content": draw(_text)}]
    for _ in range(draw(st.integers(1, 3))):
        messages.append({"role": "user", "content": draw(_text)})
        if draw(st.booleans()):
            call_id = draw(_call_ids)
            arguments = json.dumps({"q": draw(_text)})
            call = {
                "id": call_id,
                "type": "function",
                "function": {"name": "search", "arguments": arguments},
            }
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": draw(_text)})
        messages.append({"role": "assistant", "content": draw(_text)})
    return {"messages": messages[:-1], "max_tokens": draw(st.integers(1, 4096))}


@given(chats())
def test_a_chat_request_survives_the_round_trip_through_the_messages_api(chat) -> None:
    """chat -> Messages (the engine) -> chat (the gateway's own /v1/messages): the same
    conversation, however the turns fall."""
    sent = messages_request(chat, "claude-test", stream=False)
    roles = [turn["role"] for turn in sent["messages"]]
    assert roles[0] == "user" and all(a != b for a, b in zip(roles, roles[1:], strict=False))
    back = chat_request(sent)["messages"]
    system, *rest = chat["messages"]
    assert back[0] == system
    assert [m["role"] for m in back[1:]] == [m["role"] for m in rest]
    for original, returned in zip(rest, back[1:], strict=True):
        assert returned.get("content") == original.get("content")
        assert returned.get("tool_call_id") == original.get("tool_call_id")


@given(_text, st.sampled_from(["stop", "length", "tool_calls"]))
def test_an_answer_survives_the_round_trip(text, finish) -> None:
    call = {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "content": text}
    if finish == "tool_calls":
        message["tool_calls"] = [call]
    completion = {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    back = chat_completion(message_object(completion, MessageContext("msg_1", "m")))
    assert back["choices"][0]["message"] == message
    assert back["choices"][0]["finish_reason"] == finish
    assert (back["usage"]["prompt_tokens"], back["usage"]["completion_tokens"]) == (7, 3)
