"""A stored response is its llm_call: storing writes no row of its own, and the response
rebuilt from the recorded event is the one the agent was served."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
import sqlalchemy as sa

from atdp import Guardrails
from proxy.protocols.recorded import stored_document
from registry import NotFoundError, get_stored_response, transaction
from registry.tables import metadata
from tests.proxy.test_gateway_overlays import promote
from tests.proxy.test_gateway_responses import LOOKUP, _renaming

ANSWER = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}
REQUESTS = {
    "plain text": {"input": "Where is my parcel?", "instructions": "Be brief.", "user": "u-1"},
    "tool calls": {"input": 'call lookup_order with {"order_id": "A-1"}', "tools": [LOOKUP]},
    "text.format": {
        "input": "Answer in JSON.",
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": ANSWER}},
        "temperature": 0.2,
        "metadata": {"ticket": "T-9"},
    },
    "items": {
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Order A-1?"}]},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "lookup_order",
                "arguments": '{"order_id": "A-1"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "shipped"},
        ],
        "tools": [LOOKUP],
        "max_output_tokens": 64,
    },
    "logprobs": {"input": "Say hi.", "top_logprobs": 2},
}


def serve(server, key: str, request: dict, *, streamed: bool) -> dict:
    """The response the agent was served (a stream's `response.completed`)."""
    body = {"model": "support-bot", **request, "stream": streamed}
    headers = {"Authorization": f"Bearer {key}", "X-Session-Id": f"s-{uuid.uuid4().hex}"}
    answer = httpx.post(f"{server.base_url}/responses", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    if not streamed:
        return answer.json()
    events = [
        json.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    (completed,) = [e for e in events if e["type"] == "response.completed"]
    return completed["response"]


def rows(engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {
            name: connection.execute(sa.select(sa.func.count()).select_from(table)).scalar()
            for name, table in metadata.tables.items()
        }


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("case", list(REQUESTS))
def test_a_stored_response_is_rebuilt_from_its_llm_call_as_served(live, case, streamed) -> None:
    server, engine, keys = live
    served = serve(server, keys["acme"], REQUESTS[case], streamed=streamed)
    listed = httpx.get(
        f"{server.base_url}/responses/{served['id']}/input_items",
        params={"order": "asc", "limit": 100},
        headers={"Authorization": f"Bearer {keys['acme']}"},
    ).json()["data"]
    server.flush()
    with transaction(engine) as session:
        recorded = get_stored_response(session, "acme", served["id"])
    rebuilt = stored_document(recorded.event)
    assert rebuilt["response"] == served
    assert rebuilt["input"] == listed


@pytest.mark.parametrize("streamed", [False, True])
def test_storing_a_response_writes_no_row_besides_its_events(live, streamed) -> None:
    """A stored call writes exactly the rows a `store: false` call does."""
    server, engine, keys = live
    written, ids = {}, {}
    for store in (False, True):
        server.flush()
        before = rows(engine)
        request = {**REQUESTS["tool calls"], "store": store}
        ids[store] = serve(server, keys["acme"], request, streamed=streamed)["id"]
        server.flush()
        after = rows(engine)
        written[store] = {name: after[name] - before[name] for name in after}
    assert written[True] == written[False]
    assert written[True]["event"] == 2 and written[True]["deleted_response"] == 0
    with transaction(engine) as session:
        assert get_stored_response(session, "acme", ids[True])
        with pytest.raises(NotFoundError):  # nothing in the registry names it
            get_stored_response(session, "acme", ids[False])


@pytest.mark.parametrize("streamed", [False, True])
def test_a_response_rebuilt_from_its_llm_call_shows_the_agents_own_tools(
    live, upstream, streamed
) -> None:
    """The llm_call records the model's answer (renamed arguments, a blocked tool gone);
    the rebuilt response is what the agent was served, in its own argument names."""
    server, engine, keys = live
    spec = _renaming(upstream)
    spec = spec.model_copy(update={"guardrails": Guardrails(blocked_tools=["refund"])})
    promote(engine, spec)
    server.gateway.catalog.forget()
    refund = {**LOOKUP, "name": "refund", "description": "Refund an order"}
    request = {"input": 'call lookup_order with {"id": "A-9"}', "tools": [LOOKUP, refund]}
    served = serve(server, keys["acme"], request, streamed=streamed)
    (call,) = served["output"]
    assert json.loads(call["arguments"]) == {"order_id": "A-9"}
    server.flush()
    with transaction(engine) as session:
        recorded = get_stored_response(session, "acme", served["id"])
    assert json.loads(recorded.event["action"]["tool_calls"][0]["arguments"]) == {"id": "A-9"}
    assert stored_document(recorded.event)["response"] == served
