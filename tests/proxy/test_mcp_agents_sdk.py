"""An OpenAI Agents SDK agent whose tool is an MCP server reached through the gateway: its
model calls and its MCP calls land in one trajectory, the tool call linked to the llm_call
that asked for it and recorded once."""

from __future__ import annotations

import asyncio
import json

import agents  # the openai-agents distribution
import openai
from agents.mcp import MCPServerStreamableHttp

from atdp import EventKind
from tests.proxy.test_gateway_sdk import stored
from tests.proxy.test_mcp_proxy import mcp_url


def test_an_agents_sdk_agent_uses_an_mcp_tool_through_the_gateway(mcp_live, orders) -> None:
    server, engine, keys = mcp_live
    agents.set_tracing_disabled(True)  # the SDK's own tracing would export to OpenAI
    headers = {"Authorization": f"Bearer {keys['acme']}", "X-Session-Id": "agents-mcp-1"}
    model = agents.OpenAIResponsesModel(
        model="support-bot",
        openai_client=openai.AsyncOpenAI(
            base_url=server.base_url, api_key=keys["acme"], max_retries=0, default_headers=headers
        ),
    )

    async def run():
        tools = MCPServerStreamableHttp(
            params={"url": mcp_url(server), "headers": headers, "timeout": 10},
            name="orders",
        )
        async with tools:
            agent = agents.Agent(
                name="support", instructions="Help with orders.", mcp_servers=[tools], model=model
            )
            return await agents.Runner.run(
                agent, 'Where is it? call lookup_order with {"order_id": "G-7"}'
            )

    result = asyncio.run(run())
    assert result.final_output.startswith("echo:")
    assert orders.received == [("lookup_order", {"order_id": "G-7"})]
    _, events = stored(server, engine, "acme", "agents-mcp-1")
    calls = [e for e in events if e.kind is EventKind.TOOL_CALL]
    assert len(calls) == 1, [e.kind for e in events]  # the MCP call, recorded once
    asked = next(e for e in events if e.kind is EventKind.LLM_CALL and e.action.tool_calls)
    assert calls[0].parent_id == asked.id
    assert calls[0].action.call.id == asked.action.tool_calls[0].id
    assert json.loads(calls[0].action.call.arguments) == {"order_id": "G-7"}
    assert "shipped" in json.dumps(calls[0].outcome.tool_return)
    assert [e.kind for e in events].count(EventKind.LLM_CALL) == 2
