"""Overlays reach the upstream as specified, and renamed tool arguments come back renamed."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from atdp import (
    Guardrails,
    Harness,
    MemorySnapshot,
    ModelRef,
    ToolOverride,
    ToolSchemaOverlay,
    VersionSpec,
)
from evolution.replay import request_body
from evolution.rl.rewards import ToolCallReward
from evolution.rl.samples import recorded_prompts
from registry import (
    Alias,
    MemoryKind,
    add_memory_item,
    register_version,
    set_alias,
    training_records,
    transaction,
)
from runtime.version.overlays import MEMORY_BLOCK_START, apply_overlays, served_tools
from tests.proxy.test_gateway_sdk import LOOKUP, client, stored


def promote(engine, spec: VersionSpec) -> str:
    with transaction(engine) as session:
        version = register_version(
            session, "support-bot", spec, parent_id="support-bot@v1", author="t", reason="t"
        )
        set_alias(session, "support-bot", Alias.STABLE, version.id, actor="test")
    return version.id


def test_harness_memory_and_tool_schema_reach_the_upstream(live, upstream) -> None:
    server, engine, keys = live
    with transaction(engine) as session:
        fact = add_memory_item(
            session,
            "support-bot",
            "acme",
            MemoryKind.FACT,
            "Parcels to Berlin ship from the Leipzig hub on Tuesdays.",
        )
        hidden = add_memory_item(
            session,
            "support-bot",
            "globex",
            MemoryKind.FACT,
            "Globex parcels to Berlin are confidential.",
        )
    spec = VersionSpec(
        model=ModelRef(
            engine="openai",
            base_url=upstream.base_url,
            model="scripted-model",
            prompt_price=3.0,
            completion_price=15.0,
        ),
        harness=Harness(instructions="Answer in one sentence.", template="Policy: {instructions}"),
        memory=MemorySnapshot(item_ids=[str(fact.id), str(hidden.id)], top_k=2),
        tools=ToolSchemaOverlay(
            tools={
                "lookup_order": ToolOverride(
                    description="Look up an order by its id, formatted like A-17.",
                    parameters={
                        "type": "object",
                        "properties": {"id": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}},
                        "required": ["id"],
                    },
                    argument_map={"id": "order_id"},
                )
            }
        ),
        guardrails=Guardrails(max_tokens=64),
    )
    version = promote(engine, spec)
    server.gateway.catalog.forget()
    completion = client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        tools=[LOOKUP],
        max_tokens=500,
        messages=[
            {"role": "user", "content": 'Berlin parcel? call lookup_order with {"id": "A-17"}'}
        ],
        extra_headers={"X-Session-Id": "overlay-1"},
    )
    sent = upstream.requests[-1]
    system = [m["content"] for m in sent["messages"] if m["role"] == "system"]
    assert system[0] == "Policy: Answer in one sentence."
    assert MEMORY_BLOCK_START in system[1] and "Leipzig hub" in system[1]
    assert "confidential" not in json.dumps(sent)  # globex's memory never reaches acme
    tool = sent["tools"][0]["function"]
    assert tool["description"].startswith("Look up an order by its id")
    assert list(tool["parameters"]["properties"]) == ["id"]
    assert sent["max_tokens"] == 64
    # The model called the tool with its own argument name; the agent gets its name back.
    call = completion.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"order_id": "A-17"}
    assert version == "support-bot@v2"
    _, events = stored(server, engine, "acme", "overlay-1")
    usage = completion.usage
    expected = (usage.prompt_tokens * 3.0 + usage.completion_tokens * 15.0) / 1e6
    assert events[-1].metadata.cost_usd == pytest.approx(expected) and expected > 0


def test_history_is_renamed_for_the_model_and_blocked_tools_are_removed(live, upstream) -> None:
    server, engine, keys = live
    promote(
        engine,
        VersionSpec(
            model=ModelRef(engine="openai", base_url=upstream.base_url),
            tools=ToolSchemaOverlay(
                tools={"lookup_order": ToolOverride(argument_map={"id": "order_id"})}
            ),
            guardrails=Guardrails(blocked_tools=["refund"]),
        ),
    )
    server.gateway.catalog.forget()
    refund = {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
    history = [
        {"role": "user", "content": "where is A-17"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "A-17"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "shipped"},
        {"role": "user", "content": "call refund with {}"},
    ]
    completion = client(server, keys["acme"]).chat.completions.create(
        model="support-bot", messages=history, tools=[LOOKUP, refund]
    )
    sent = upstream.requests[-1]
    assert [t["function"]["name"] for t in sent["tools"]] == ["lookup_order"]
    assert json.loads(sent["messages"][1]["tool_calls"][0]["function"]["arguments"]) == {
        "id": "A-17"
    }
    assert completion.choices[0].message.tool_calls is None


def test_streamed_tool_calls_come_back_renamed(live, upstream) -> None:
    server, engine, keys = live
    promote(
        engine,
        VersionSpec(
            model=ModelRef(engine="openai", base_url=upstream.base_url),
            tools=ToolSchemaOverlay(
                tools={"lookup_order": ToolOverride(argument_map={"id": "order_id"})}
            ),
        ),
    )
    server.gateway.catalog.forget()
    stream = client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        tools=[LOOKUP],
        stream=True,
        messages=[{"role": "user", "content": 'call lookup_order with {"id": "B-9"}'}],
    )
    arguments = "".join(
        call.function.arguments or ""
        for chunk in stream
        for choice in chunk.choices
        for call in (choice.delta.tool_calls or [])
    )
    assert json.loads(arguments) == {"order_id": "B-9"}


def test_bad_requests_are_refused_and_nothing_is_written(live, upstream) -> None:
    import httpx

    server, engine, keys = live
    headers = {"Authorization": f"Bearer {keys['acme']}", "Content-Type": "application/json"}
    url = f"{server.base_url}/chat/completions"
    cases = [
        (b"{not json", 400, "invalid_json"),
        (json.dumps({"model": "support-bot", "messages": "hi"}).encode(), 400, "invalid_value"),
        (
            json.dumps(
                {"model": "support-bot", "messages": [{"role": "wizard", "content": "x"}]}
            ).encode(),
            400,
            "invalid_value",
        ),
        (
            json.dumps(
                {
                    "model": "support-bot",
                    "messages": [{"role": "user", "content": "x"}],
                    "tools": [
                        {"type": "function", "function": {"name": "f", "parameters": {"type": 5}}}
                    ],
                }
            ).encode(),
            400,
            "invalid_value",
        ),
        (
            json.dumps(
                {"model": "support-bot", "messages": [{"role": "user", "content": "x" * 70_000}]}
            ).encode(),
            413,
            "body_too_large",
        ),
    ]
    for body, status, code in cases:
        response = httpx.post(url, content=body, headers=headers, timeout=10)
        assert response.status_code == status, response.text
        error = response.json()["error"]
        assert error["code"] == code and error["message"] and "type" in error
    assert upstream.requests == []
    server.flush()
    with engine.connect() as connection:
        from sqlalchemy import text

        assert connection.execute(text("SELECT count(*) FROM event")).scalar() == 0
        assert connection.execute(text("SELECT count(*) FROM trajectory")).scalar() == 0


def test_a_bad_training_header_is_a_clear_400(live) -> None:
    server, _, keys = live
    try:
        client(server, keys["acme"]).chat.completions.create(
            model="support-bot",
            messages=[{"role": "user", "content": "x"}],
            extra_headers={"X-Evoplane-Training": "maybe"},
        )
    except openai.BadRequestError as error:
        assert error.body["param"] == "X-Evoplane-Training"
    else:
        raise AssertionError("expected a 400")


def test_tenant_rate_limit_is_a_429_with_retry_after(world, registry_url, tmp_path) -> None:
    from proxy.config import GatewayConfig
    from tests.support.gateway import GatewayServer

    _, keys = world
    config = GatewayConfig(database_url=registry_url, spool_dir=tmp_path / "rl", rate_limit=1.0)
    with GatewayServer(config) as server:
        acme, globex = client(server, keys["acme"]), client(server, keys["globex"])
        ask = {"model": "support-bot", "messages": [{"role": "user", "content": "hi"}]}
        acme.chat.completions.create(**ask)
        acme.chat.completions.create(**ask)  # a burst of two seconds' worth is allowed
        try:
            acme.chat.completions.create(**ask)
        except openai.RateLimitError as error:
            assert int(error.response.headers["retry-after"]) >= 1
            assert error.body["type"] == "rate_limit_error"
        else:
            raise AssertionError("expected a 429")
        assert globex.chat.completions.create(**ask).choices  # another tenant is not limited


def test_the_agents_own_request_is_recoverable_from_the_recorded_event(live, upstream) -> None:
    """The event records what the model saw; replay needs what the agent sent."""
    server, engine, keys = live
    with transaction(engine) as session:
        fact = add_memory_item(
            session, "support-bot", "acme", MemoryKind.FACT, "Refunds take five days."
        )
    promote(
        engine,
        VersionSpec(
            model=ModelRef(engine="openai", base_url=upstream.base_url),
            harness=Harness(instructions="Be brief."),
            memory=MemorySnapshot(item_ids=[str(fact.id)]),
            tools=ToolSchemaOverlay(
                tools={
                    "lookup_order": ToolOverride(
                        description="Order ids look like A-17.", argument_map={"id": "order_id"}
                    )
                }
            ),
            guardrails=Guardrails(blocked_tools=["refund"]),
        ),
    )
    server.gateway.catalog.forget()
    refund = {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
    agent_messages = [
        {"role": "system", "content": "You are Acme's support agent."},
        {"role": "user", "content": "How long do refunds take for A-17?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "lookup_order", "arguments": '{"order_id": "A-17"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "refund pending"},
    ]
    client(server, keys["acme"]).chat.completions.create(
        model="support-bot",
        messages=agent_messages,
        tools=[LOOKUP, refund],
        extra_headers={"X-Session-Id": "recover-1"},
    )
    sent = upstream.requests[-1]
    assert sent["messages"] != agent_messages and len(sent["tools"]) == 1  # overlays applied
    _, events = stored(server, engine, "acme", "recover-1")
    llm_call = next(e for e in events if e.kind == "llm_call")
    recovered = request_body(llm_call)
    assert recovered["messages"] == agent_messages
    assert [t["function"]["name"] for t in recovered["tools"]] == ["lookup_order", "refund"]
    assert recovered["tools"][0]["function"].get("description") == LOOKUP["function"].get(
        "description"
    )


def test_a_training_prompt_keeps_what_the_agents_tools_accept(live, upstream) -> None:
    """A weights job rewards calls as the agent receives them, so the export must say how the
    version renamed the arguments and what the agent's own schemas are."""
    server, engine, keys = live
    shown = {
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "required": ["id"],
        "additionalProperties": False,
    }
    promote(
        engine,
        VersionSpec(
            model=ModelRef(engine="openai", base_url=upstream.base_url),
            tools=ToolSchemaOverlay(
                tools={
                    "lookup_order": ToolOverride(parameters=shown, argument_map={"id": "order_id"})
                }
            ),
        ),
    )
    server.gateway.catalog.forget()
    # The model writes the agent's own argument name; no map renames it and the agent's
    # tool takes it, so the customer is served and says so.
    raw = client(server, keys["acme"]).chat.completions.with_raw_response.create(
        model="support-bot",
        messages=[{"role": "user", "content": 'call lookup_order with {"order_id": "A-17"}'}],
        tools=[LOOKUP],
        extra_headers={"X-Session-Id": "export-1"},
    )
    call = raw.parse().choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"order_id": "A-17"}
    posted = httpx.post(
        f"{server.base_url}/feedback",
        json={"event_id": raw.headers["X-Evoplane-Event-Id"], "thumbs": "up"},
        headers={"Authorization": f"Bearer {keys['acme']}"},
    )
    assert posted.status_code == 201, posted.text
    server.flush()
    with transaction(engine) as session:
        (prompt,) = recorded_prompts(training_records(session, "support-bot", ["acme"]))
    assert prompt.tools[0]["function"]["parameters"] == shown  # what the model saw
    assert prompt.agent_tools == [LOOKUP]
    assert prompt.argument_maps == {"lookup_order": {"id": "order_id"}}
    assert prompt.reference == {"name": "lookup_order", "arguments": {"order_id": "A-17"}}
    reward = ToolCallReward()

    def scored(arguments: dict) -> float:
        payload = json.dumps({"name": "lookup_order", "arguments": arguments})
        return reward(prompt, f"<tool_call>{payload}</tool_call>")

    assert scored({"order_id": "A-17"}) == scored({"id": "A-17"}) == 1.0
    assert scored({"ref": "A-17"}) == 0.0


def test_served_tools_are_the_versions_view_in_the_agents_names() -> None:
    """What a call the agent receives back must satisfy: a rename with an argument map is
    back under the agent's name; one without (the tool wants the new name) keeps it."""
    tool = {
        "type": "function",
        "function": {
            "name": "book",
            "parameters": {
                "type": "object",
                "properties": {"patient": {"type": "string"}, "day": {"type": "string"}},
                "required": ["patient"],
            },
        },
    }
    shown = {
        "type": "object",
        "properties": {"patient_number": {"type": "string", "pattern": "^\\\\d+$"}},
        "required": ["patient_number"],
    }

    def served(argument_map: dict) -> dict:
        spec = VersionSpec(
            model=ModelRef(engine="openai", base_url="http://up/v1", model="m"),
            tools=ToolSchemaOverlay(
                tools={"book": ToolOverride(parameters=shown, argument_map=argument_map)}
            ),
        )
        overlaid = apply_overlays({"messages": [], "tools": [tool]}, spec)
        (presented,) = served_tools(overlaid)
        return presented["function"]["parameters"]

    mapped = served({"patient_number": "patient"})
    assert list(mapped["properties"]) == ["patient"] and mapped["required"] == ["patient"]
    assert mapped["properties"]["patient"]["pattern"] == "^\\\\d+$"
    assert served({}) == shown
