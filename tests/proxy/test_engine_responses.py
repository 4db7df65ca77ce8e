"""The `openai-responses` engine: a version served by an upstream that speaks the Responses
API, whole and streamed, with the version's overlays; the gateway keeps the conversation
(`store: false` upstream)."""

from __future__ import annotations

import json

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.engines.openai_responses import chat_completion, responses_request
from proxy.protocols.responses import ResponseContext, chat_request, response_object
from tests.proxy.test_engine_anthropic import chats, served_by, tool_call, tool_result
from tests.proxy.test_gateway_sdk import client, stored
from tests.support.protocol_upstreams import ResponsesUpstream


@pytest.fixture
def responses_live(tmp_path):
    with ResponsesUpstream(api_key="sk-test") as upstream:
        with served_by(tmp_path, upstream, "openai-responses", "gpt-test") as live:
            yield *live, upstream


@pytest.mark.parametrize("streamed", [False, True])
def test_a_chat_agent_is_served_by_a_responses_upstream(responses_live, streamed) -> None:
    server, engine, keys, upstream = responses_live
    sdk = client(server, keys["acme"])
    session = f"resp-up-{streamed}"
    question = {"role": "user", "content": 'Where? call lookup_order with {"id": "A-17"}'}
    arguments, call_id = tool_call(sdk, question, session, streamed)
    sent = upstream.requests[-1]
    assert sent["model"] == "gpt-test" and sent["store"] is False
    assert sent["input"][0] == {
        "type": "message",
        "role": "system",
        "content": "You are Acme's support agent.",
    }
    assert sent["tools"][0]["name"] == "lookup_order"
    assert json.loads(arguments) == {"order_id": "A-17"}  # the model's `id`, mapped back

    done = tool_result(sdk, question, session, call_id, arguments, "shipped")
    items = upstream.requests[-1]["input"]
    assert items[-2]["type"] == "function_call" and items[-2]["call_id"] == call_id
    assert json.loads(items[-2]["arguments"]) == {"id": "A-17"}  # as the version shows it
    assert items[-1] == {"type": "function_call_output", "call_id": call_id, "output": "shipped"}
    assert done.choices[0].message.content.startswith("echo:")
    _, events = stored(server, engine, "acme", session)
    llm = [e for e in events if e.kind.value == "llm_call"]
    assert llm[0].metadata.tokens.prompt > 0 and llm[-1].action.content.startswith("echo:")


def test_an_upstream_refusal_is_the_agents_error(responses_live) -> None:
    server, _, keys, upstream = responses_live
    upstream.api_key = "another-key"
    with pytest.raises(openai.APIStatusError) as error:
        client(server, keys["acme"]).chat.completions.create(
            model="support-bot", messages=[{"role": "user", "content": "hi"}]
        )
    assert error.value.status_code == 502 and "invalid api key" in str(error.value)


@given(chats())
def test_a_chat_request_survives_the_round_trip_through_the_responses_api(chat) -> None:
    """chat -> Responses (the engine) -> chat (the gateway's own /v1/responses)."""
    back = chat_request(responses_request(chat, "gpt-test", stream=False))
    assert back["messages"] == chat["messages"]
    assert back["max_tokens"] == chat["max_tokens"]


@given(st.text(min_size=1, max_size=40), st.sampled_from(["stop", "length", "tool_calls"]))
def test_an_answer_survives_the_round_trip(text, finish) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    message = {"role": "assistant", "content": text}
    if finish == "tool_calls":
        message["tool_calls"] = [call]
    completion = {
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    response = response_object(completion, ResponseContext("resp_1", {"model": "m"}))
    back = chat_completion(response)
    assert back["choices"][0]["message"] == message
    assert back["choices"][0]["finish_reason"] == finish
    assert (back["usage"]["prompt_tokens"], back["usage"]["completion_tokens"]) == (7, 3)
