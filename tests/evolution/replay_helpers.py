"""A small deterministic upstream and an agent loop that records what the gateway records.

`FactModel` stands for a version served through the gateway: its answers depend on the
request (facts in the system prompt, the last message, the tools offered) and on what the
version knows (`facts`, as a memory overlay would add them). `record` runs an agent loop
against it and returns the events the gateway would have captured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from atdp import (
    ChatMessage,
    DecodingParams,
    Event,
    EventKind,
    EventMetadata,
    MessageAction,
    Observation,
    Outcome,
    ReplayInfo,
    ToolCall,
    ToolCallAction,
    ToolSpec,
    Trajectory,
    new_id,
    utcnow,
)
from tests.registry.helpers import trajectory

LOOKUP_ORDER = {
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Find an order by its id.",
        "parameters": {
            "type": "object",
            "properties": {"order_id": {"type": "string", "pattern": "^[A-Z]-[0-9]+$"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
    },
}

_FACT_LINE = re.compile(r"fact:\s*(.+?)\s*=\s*(.+)", re.IGNORECASE)
_QUESTION = re.compile(r"what is the ([\w ]+?)\?", re.IGNORECASE)
_ORDER = re.compile(r"order ([A-Z])-(\d+)")


@dataclass
class FactModel:
    """A deterministic stand-in for a served version.

    Args:
        facts: what the version knows beyond the prompt (as a memory overlay would add).
        id_format: "string" emits order ids as "A-1"; "int" emits 1 (breaks the schema).
        call_prefix: tool-call ids start with it, so two versions' ids differ.
        uses_tools: whether it calls the tools it is offered at all.
    """

    facts: dict[str, str] = field(default_factory=dict)
    id_format: str = "string"
    call_prefix: str = "call"
    uses_tools: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            return _completion(f"Order status: {last['content']}.")
        text = last.get("content") or ""
        order = _ORDER.search(text)
        if order and body.get("tools") and self.uses_tools:
            return _completion(None, [self._lookup(order, len(body["messages"]))])
        question = _QUESTION.search(text)
        if question:
            return _completion(self._answer(question.group(1).lower(), body["messages"]))
        return _completion("OK.")

    def _lookup(self, order: re.Match, position: int) -> dict[str, Any]:
        order_id: Any = f"{order.group(1)}-{order.group(2)}"
        if self.id_format == "int":
            order_id = int(order.group(2))
        arguments = json.dumps({"order_id": order_id})
        return {
            "id": f"{self.call_prefix}_{position}",
            "type": "function",
            "function": {"name": "lookup_order", "arguments": arguments},
        }

    def _answer(self, key: str, messages: list[dict[str, Any]]) -> str:
        known = dict(self.facts)
        for message in messages:
            if message["role"] == "system":
                known.update(
                    (k.lower(), v) for k, v in _FACT_LINE.findall(message["content"] or "")
                )
        if key in known:
            return f"The {key} is {known[key]}."
        return f"I don't know the {key}."


def _completion(content: str | None, calls: list[dict] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": "fact-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
    }


# --- recording -----------------------------------------------------------------------------


def chat_message(message: dict[str, Any]) -> ChatMessage:
    """An OpenAI message dict as ATDP records it."""
    return ChatMessage(
        role=message["role"],
        content=message.get("content"),
        name=message.get("name"),
        tool_calls=[_tool_call(call) for call in message.get("tool_calls") or []],
        tool_call_id=message.get("tool_call_id"),
    )


def _tool_call(call: dict[str, Any]) -> ToolCall:
    return ToolCall(
        id=call["id"], name=call["function"]["name"], arguments=call["function"]["arguments"]
    )


def tool_spec(tool: dict[str, Any]) -> ToolSpec:
    function = tool["function"]
    return ToolSpec(
        name=function["name"],
        description=function.get("description"),
        parameters=function.get("parameters"),
    )


@dataclass
class Recorder:
    """Numbers events of one trajectory in order, shaped as the gateway records them."""

    trajectory: Trajectory
    events: list[Event] = field(default_factory=list)

    def add(self, kind: EventKind, replay: ReplayInfo, **fields: Any) -> Event:
        event = Event(
            id=new_id(),
            trajectory_id=self.trajectory.id,
            seq=len(self.events),
            kind=kind,
            created_at=utcnow(),
            metadata=EventMetadata(
                tenant=self.trajectory.tenant,
                session=self.trajectory.session,
                decoding=fields.pop("decoding", None),
            ),
            replay=replay,
            **fields,
        )
        self.events.append(event)
        return event


DETERMINISTIC = ReplayInfo(replay_class="deterministic")
A_PERSONS_INPUT = ReplayInfo(replay_class="non_replayable", reason="a person's input")
SUBSTITUTABLE = ReplayInfo(replay_class="approximate", reason="executed by the agent")


async def record(
    serve: Callable,
    user_turns: list[str],
    *,
    tenant: str = "acme",
    system: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    run_tool: Callable[[str, str], str] | None = None,
    tool_replay: ReplayInfo = SUBSTITUTABLE,
) -> list[Event]:
    """Run an agent loop against `serve` and return the events the gateway would record."""
    recorder = Recorder(trajectory(tenant))
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for text in user_turns:
        user = {"role": "user", "content": text}
        messages.append(user)
        recorder.add(
            EventKind.USER_MESSAGE,
            A_PERSONS_INPUT,
            observation=Observation(messages=[chat_message(user)]),
        )
        while True:
            body: dict[str, Any] = {"messages": list(messages), "temperature": 0.0, "seed": 7}
            if tools:
                body["tools"] = tools
            response = await serve(body)
            message = response["choices"][0]["message"]
            recorder.add(
                EventKind.LLM_CALL,
                SUBSTITUTABLE if any(m["role"] == "tool" for m in messages) else DETERMINISTIC,
                observation=Observation(
                    messages=[chat_message(m) for m in messages],
                    tools=[tool_spec(t) for t in tools or []],
                ),
                action=MessageAction(
                    content=message.get("content"),
                    tool_calls=[_tool_call(c) for c in message.get("tool_calls") or []],
                    finish_reason=response["choices"][0]["finish_reason"],
                ),
                decoding=DecodingParams(temperature=0.0, seed=7),
            )
            messages.append(message)
            if not message.get("tool_calls"):
                break
            for call in message["tool_calls"]:
                assert run_tool is not None, "the model called a tool but no run_tool was given"
                output = run_tool(call["function"]["name"], call["function"]["arguments"])
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
                # As the gateway classifies a result: one that starts with "error" failed.
                error = "tool_error" if output.lower().startswith("error") else None
                recorder.add(
                    EventKind.TOOL_CALL,
                    tool_replay,
                    action=ToolCallAction(call=_tool_call(call)),
                    outcome=Outcome(tool_return=output, error_class=error, success=error is None),
                )
    return recorder.events


async def held_out_gate(
    engine,
    parent_id: str,
    candidate_id: str,
    action,
    held_out,
    simulators: dict | None = None,
):
    """The real replay gate (in Temporal's ActivityEnvironment) on a held-out window."""
    from temporalio.testing import ActivityEnvironment

    from activities.models import ReplayGateRequest
    from activities.replay_gate import ReplayGate
    from evolution.gates import GateConfig

    gate = ReplayGate(engine, timeout=10, simulators=simulators)
    try:
        return await ActivityEnvironment().run(
            gate.run,
            ReplayGateRequest(
                evolution_id="e",
                agent=held_out.agent,
                baseline_version=parent_id,
                candidate_version=candidate_id,
                action=action,
                gate=GateConfig(replay_min_cases=5),
                window=held_out,
            ),
        )
    finally:
        await gate.aclose()


def improvement(label: str, result):
    """The failures' and successes' judgements of a replay gate, the improvement printed."""
    failures = next(m for m in result.metrics if m.metric == "replay:failures")
    successes = next(m for m in result.metrics if m.metric == "replay:successes")
    print(  # the improvement, for the person reading the test log
        f"\n{label}: held-out failures parent {failures.baseline_mean:.2f} -> candidate "
        f"{failures.candidate_mean:.2f} ({len(result.fixed)} of {failures.n_baseline} fixed); "
        f"held-out successes parent {successes.baseline_mean:.2f} -> candidate "
        f"{successes.candidate_mean:.2f} ({len(result.broken)} broken)"
    )
    return failures, successes
