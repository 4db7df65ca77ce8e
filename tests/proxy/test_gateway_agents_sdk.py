"""The OpenAI Agents SDK, on its default (Responses) model, through the gateway: a tool-using
agent over several turns, whole and streamed, captured as one trajectory per session."""

from __future__ import annotations

import asyncio

import agents  # the openai-agents distribution
import openai

from atdp import EventKind, ToolCallAction, protocol_request
from tests.proxy.test_gateway_sdk import stored

LOOKUPS: list[str] = []


@agents.function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    LOOKUPS.append(order_id)
    return f"order {order_id}: shipped"


def support_agent(server, key: str, session: str):
    agents.set_tracing_disabled(True)  # the SDK's own tracing would export to OpenAI
    sdk = openai.AsyncOpenAI(
        base_url=server.base_url,
        api_key=key,
        max_retries=0,
        default_headers={"X-Session-Id": session},
    )
    model = agents.OpenAIResponsesModel(model="support-bot", openai_client=sdk)
    return agents.Agent(
        name="support", instructions="Help with orders.", tools=[lookup_order], model=model
    )


def check_trajectory(server, engine, session: str) -> None:
    _, events = stored(server, engine, "acme", session)
    kinds = [e.kind for e in events]
    assert kinds == [
        EventKind.USER_MESSAGE,
        EventKind.LLM_CALL,
        EventKind.TOOL_CALL,
        EventKind.LLM_CALL,
    ]
    tool = events[2]
    assert isinstance(tool.action, ToolCallAction) and tool.action.call.name == "lookup_order"
    assert "shipped" in str(tool.outcome.tool_return)
    assert all(
        protocol_request(e.observation.data)[0] == "responses"
        for e in events
        if e.kind is EventKind.LLM_CALL
    )


def test_a_tool_using_agent_runs_through_the_gateway(live, upstream) -> None:
    server, engine, keys = live
    LOOKUPS.clear()
    agent = support_agent(server, keys["acme"], "agents-1")
    result = agents.Runner.run_sync(
        agent, 'Where is it? call lookup_order with {"order_id": "A-17"}'
    )
    assert LOOKUPS == ["A-17"]
    assert result.final_output.startswith("echo:")
    # The version's harness and the agent's own instructions both reached the model.
    system = upstream.requests[-1]["messages"][0]["content"]
    assert "You are Acme's support agent." in system and "Help with orders." in system
    check_trajectory(server, engine, "agents-1")


def test_a_streamed_run_through_the_gateway(live) -> None:
    server, engine, keys = live
    LOOKUPS.clear()
    agent = support_agent(server, keys["acme"], "agents-stream")

    async def run() -> tuple[list[str], str]:
        streamed = agents.Runner.run_streamed(agent, 'call lookup_order with {"order_id": "B-2"}')
        kinds = [event.type async for event in streamed.stream_events()]
        return kinds, streamed.final_output

    kinds, final = asyncio.run(run())
    assert LOOKUPS == ["B-2"]
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    assert final.startswith("echo:")
    check_trajectory(server, engine, "agents-stream")
