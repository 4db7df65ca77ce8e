"""The OpenAI Responses API through the gateway, with the real `openai` SDK: served by the
chat-completions pipeline (harness, memory, tool schemas apply), captured as the same ATDP
events, stored per tenant for `previous_response_id`."""

from __future__ import annotations

import json

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from atdp import (
    EventKind,
    Harness,
    MemorySnapshot,
    ModelRef,
    ToolCallAction,
    ToolOverride,
    ToolSchemaOverlay,
    VersionSpec,
    protocol_request,
)
from registry import MemoryKind, add_memory_item, get_events, list_trajectories, transaction
from runtime.version.overlays import MEMORY_BLOCK_START
from tests.proxy.test_gateway_overlays import promote
from tests.proxy.test_gateway_sdk import client, stored

LOOKUP = {
    "type": "function",
    "name": "lookup_order",
    "description": "Look up an order",
    "parameters": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
}


def test_a_response_applies_the_harness_and_is_captured_with_its_protocol(live, upstream):
    server, engine, keys = live
    raw = client(server, keys["acme"]).responses.with_raw_response.create(
        model="support-bot",
        input="Where is my parcel?",
        instructions="Be brief.",
        max_output_tokens=50,
        extra_headers={"X-Session-Id": "resp-1"},
    )
    response = raw.parse()
    sent = upstream.requests[-1]
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["messages"][0]["content"] == "You are Acme's support agent.\n\nBe brief."
    assert sent["max_tokens"] == 50 and sent["model"] == "scripted-model"
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output_text.startswith("echo: Where is my parcel?")
    assert response.usage.input_tokens > 0 and response.usage.total_tokens > 0

    _, events = stored(server, engine, "acme", "resp-1")
    assert [e.kind for e in events] == [EventKind.USER_MESSAGE, EventKind.LLM_CALL]
    llm = events[-1]
    assert str(llm.id) == raw.headers["x-evoplane-event-id"]
    assert llm.action.content == response.output_text
    name, request = protocol_request(llm.observation.data)
    assert name == "responses" and request["input"] == "Where is my parcel?"
    assert request["instructions"] == "Be brief."


def test_previous_response_id_continues_the_conversation_in_one_trajectory(live, upstream):
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    first = sdk.responses.create(model="support-bot", input="My name is Ada.")
    second = sdk.responses.create(
        model="support-bot", input="What is my name?", previous_response_id=first.id
    )
    sent = upstream.requests[-1]["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"] == "My name is Ada."
    assert sent[2]["content"] == first.output_text
    assert second.previous_response_id == first.id

    fetched = sdk.responses.retrieve(second.id)
    assert fetched.output_text == second.output_text
    items = sdk.responses.input_items.list(second.id)
    assert [i.content[0].text for i in items.data] == ["What is my name?"]
    # Both calls are one session (the first response's), so one trajectory.
    server.flush()
    with transaction(engine) as s:
        (trajectory,) = list_trajectories(s, "acme")
        kinds = [e.kind for e in get_events(s, "acme", trajectory.id)]
    assert kinds.count(EventKind.LLM_CALL) == 2

    # Another tenant can neither continue nor read it.
    other = client(server, keys["globex"])
    with pytest.raises(openai.NotFoundError):
        other.responses.create(model="support-bot", input="hi", previous_response_id=first.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(first.id)

    sdk.responses.delete(first.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(first.id)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.create(model="support-bot", input="again", previous_response_id=first.id)


def test_store_false_keeps_no_response(live) -> None:
    server, _, keys = live
    sdk = client(server, keys["acme"])
    response = sdk.responses.create(model="support-bot", input="hello", store=False)
    with pytest.raises(openai.NotFoundError):
        sdk.responses.retrieve(response.id)


def test_a_tool_using_agent_over_several_turns(live, upstream) -> None:
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    first = sdk.responses.create(
        model="support-bot",
        input='Where is it? call lookup_order with {"order_id": "A-17"}',
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": "resp-tools"},
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "lookup_order" and json.loads(call.arguments) == {"order_id": "A-17"}
    assert upstream.requests[-1]["tools"][0]["function"]["name"] == "lookup_order"
    second = sdk.responses.create(
        model="support-bot",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "shipped"}],
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": "resp-tools"},
    )
    sent = upstream.requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id
    assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "shipped"}
    assert second.output_text

    _, events = stored(server, engine, "acme", "resp-tools")
    kinds = [e.kind for e in events]
    assert kinds == [
        EventKind.USER_MESSAGE,
        EventKind.LLM_CALL,
        EventKind.TOOL_CALL,
        EventKind.LLM_CALL,
    ]
    tool = events[2]
    assert isinstance(tool.action, ToolCallAction) and tool.action.call.id == call.call_id
    assert tool.parent_id == events[1].id and tool.outcome.tool_return == "shipped"


def test_a_stream_sends_the_events_in_order_and_is_captured(live, upstream) -> None:
    server, engine, keys = live
    sdk = client(server, keys["acme"])
    events = list(
        sdk.responses.create(
            model="support-bot",
            input="Stream this please",
            stream=True,
            extra_headers={"X-Session-Id": "resp-stream"},
        )
    )
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    completed = events[-1].response
    assert completed.output_text == text and text.startswith("echo: Stream this please")

    _, stored_events = stored(server, engine, "acme", "resp-stream")
    llm = stored_events[-1]
    assert llm.action.content == text
    assert protocol_request(llm.observation.data)[0] == "responses"
    assert sdk.responses.retrieve(completed.id).output_text == text


def test_the_stream_helper_and_a_streamed_tool_call(live) -> None:
    server, _, keys = live
    with client(server, keys["acme"]).responses.stream(
        model="support-bot",
        input='call lookup_order with {"order_id": "B-2"}',
        tools=[LOOKUP],
    ) as events:
        final = events.get_final_response()
    (call,) = final.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"order_id": "B-2"}


def _renaming(upstream) -> VersionSpec:
    return VersionSpec(
        model=ModelRef(engine="openai", base_url=upstream.base_url, model="scripted-model"),
        harness=Harness(instructions="House rules."),
        tools=ToolSchemaOverlay(
            tools={
                "lookup_order": ToolOverride(
                    parameters={
                        "type": "object",
                        "properties": {"id": {"type": "string"}},
                        "required": ["id"],
                    },
                    argument_map={"id": "order_id"},
                )
            }
        ),
    )


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
    sdk = client(server, keys["acme"])
    question = 'Oslo parcels? call lookup_order with {"id": "A-9"}'
    if streamed:
        with sdk.responses.stream(model="support-bot", input=question, tools=[LOOKUP]) as events:
            response = events.get_final_response()
    else:
        response = sdk.responses.create(model="support-bot", input=question, tools=[LOOKUP])
    sent = upstream.requests[-1]
    system = [m["content"] for m in sent["messages"] if m["role"] == "system"]
    assert system[0] == "House rules."
    assert MEMORY_BLOCK_START in system[1] and "Oslo leave on Mondays" in system[1]
    assert list(sent["tools"][0]["function"]["parameters"]["properties"]) == ["id"]
    (call,) = [item for item in response.output if item.type == "function_call"]
    assert json.loads(call.arguments) == {"order_id": "A-9"}  # the agent's own name


def test_what_cannot_be_served_is_a_clear_openai_error(live) -> None:
    server, _, keys = live
    sdk = client(server, keys["acme"])
    with pytest.raises(openai.BadRequestError, match="web_search") as error:
        sdk.responses.create(model="support-bot", input="hi", tools=[{"type": "web_search"}])
    assert error.value.body["param"] == "tools.0"
    with pytest.raises(openai.BadRequestError, match="input"):
        sdk.responses.create(model="support-bot", input=[{"type": "item_reference", "id": "x"}])
    with pytest.raises(openai.NotFoundError):
        sdk.responses.create(model="support-bot", input="hi", previous_response_id="resp_nope")
    with pytest.raises(openai.NotFoundError):
        sdk.responses.create(model="no-such-agent", input="hi")
    with pytest.raises(openai.AuthenticationError):
        client(server, "wrong-key").responses.create(model="support-bot", input="hi")


@pytest.mark.parametrize("sealed", [False, True])
def test_nothing_raw_is_at_rest_and_a_restarted_gateway_continues(
    world, registry_url, tmp_path, upstream, sealed
) -> None:
    """Without a seal key the stored conversation is redacted; with one it is sealed and a
    continuation served from the registry reads back what the agent wrote."""
    from cryptography.fernet import Fernet

    from proxy.config import GatewayConfig
    from registry import get_stored_response
    from tests.support.gateway import GatewayServer

    engine, keys = world
    config = GatewayConfig(
        database_url=registry_url,
        spool_dir=tmp_path / "spool",
        seal_key=Fernet.generate_key().decode() if sealed else None,
    )
    secret = "Write to ada.lovelace@example.com about it."
    with GatewayServer(config) as server:
        sdk = client(server, keys["acme"])
        first = sdk.responses.create(model="support-bot", input=secret)
        second = sdk.responses.create(
            model="support-bot", input="Thanks.", previous_response_id=first.id
        )
        server.flush()
    with transaction(engine) as session:
        at_rest = get_stored_response(session, "acme", first.id)
    assert "ada.lovelace@example.com" not in json.dumps(at_rest.event)
    assert (at_rest.sealed is not None) is sealed

    with GatewayServer(config) as server:  # a new process: nothing in memory
        client(server, keys["acme"]).responses.create(
            model="support-bot", input="And then?", previous_response_id=second.id
        )
    history = upstream.requests[-1]["messages"]
    assert [m["role"] for m in history] == [
        "system",
        *("user", "assistant") * 2,
        "user",
    ]
    assert history[3]["content"] == "Thanks." and history[4]["content"] == second.output_text
    assert ("ada.lovelace@example.com" in history[1]["content"]) is sealed


def test_a_stored_response_is_redacted_wherever_its_call_held_something(live) -> None:
    """A stored response is its llm_call: whatever part of the request or answer holds
    the secret, the call at rest holds a placeholder; a clean one rebuilds as served."""
    from proxy.protocols.recorded import stored_document
    from registry import get_stored_response

    server, engine, keys = live
    sdk = client(server, keys["acme"])
    secret = "ada.lovelace@example.com"
    asks_lookup = "call lookup_order with " + json.dumps({"order_id": secret})
    earlier_call = {
        "type": "function_call",
        "call_id": "c1",
        "name": "lookup_order",
        "arguments": json.dumps({"order_id": secret}),
    }
    places = {
        "input text": {"input": f"mail {secret}"},
        "input parts": {
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": f"mail {secret}"}]}
            ]
        },
        "tool output": {
            "input": [
                {**earlier_call, "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": secret},
            ],
            "tools": [LOOKUP],
        },
        "arguments": {
            "input": [
                earlier_call,
                {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            ],
            "tools": [LOOKUP],
        },
        "answer's call": {"input": asks_lookup, "tools": [LOOKUP]},
        "instructions": {"input": "hello", "instructions": f"Write to {secret}."},
        "metadata": {"input": "hello", "metadata": {"contact": secret}},
        "tool description": {
            "input": "hello",
            "tools": [{**LOOKUP, "description": f"Escalate to {secret}."}],
        },
    }
    ids = {
        place: sdk.responses.create(model="support-bot", **request).id
        for place, request in places.items()
    }
    clean = sdk.responses.create(model="support-bot", input="Where is my parcel?")
    served = sdk.responses.retrieve(clean.id).model_dump(mode="json", exclude_unset=True)
    server.flush()
    with transaction(engine) as session:
        for place, response_id in ids.items():
            at_rest = json.dumps(get_stored_response(session, "acme", response_id).event)
            assert secret not in at_rest and "[REDACTED:EMAIL]" in at_rest, place
        kept = stored_document(get_stored_response(session, "acme", clean.id).event)
    assert kept["response"] == served


@given(
    inputs=st.integers(0, 6),
    calls=st.integers(0, 4),
    text=st.booleans(),
    given_id=st.sampled_from([None, "msg_1", "fc_1"]),
)
def test_item_ids_are_unique_within_a_response_and_never_repeat_across(
    inputs, calls, text, given_id
) -> None:
    """Item ids come from the response's own id and a count: distinct within a response
    (input and output, next to any id the agent gave) and between two responses."""
    from proxy.protocols import responses

    def one() -> list[str]:
        items = [{"role": "user", "content": f"turn {i}"} for i in range(inputs)]
        if given_id:
            items.append({"type": "message", "id": given_id, "role": "user", "content": "x"})
        message = {"role": "assistant", "content": "done" if text else None}
        message["tool_calls"] = [
            {"id": f"c{i}", "function": {"name": "f", "arguments": "{}"}} for i in range(calls)
        ]
        context = responses.ResponseContext(responses.new_response_id(), {"model": "m"})
        response = responses.response_object({"choices": [{"message": message}]}, context)
        listed = responses.listed_input(items, context)
        ids = [item["id"] for item in [*response["output"], *listed]]
        for item in [*response["output"], *listed]:
            if item["id"] == given_id:
                continue  # the agent's own, kept as it is
            expected = {"message": "msg_", "function_call": "fc_"}[item["type"]]
            assert item["id"].startswith(expected)
        return ids

    first, second = one(), one()
    assert len(set(first)) == len(first) and len(set(second)) == len(second)
    assert not (set(first) & set(second)) - {given_id}
