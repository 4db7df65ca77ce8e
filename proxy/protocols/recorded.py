"""A stored Responses API response, rebuilt from the llm_call event that produced it.

A stored response has no record of its own: the call's llm_call holds the request as the
agent sent it (`observation.data`, protocol "responses") and the answer (`action`, the
token counts, the logprobs), and its `metadata.extra["stored_response"]` adds what only the
response has: its id, its creation time, when it expires, the response it continued, and
whether it was streamed (a streamed response's text carries no logprobs). Item ids come
from the response id and a count (`ResponseContext.item_id`), output first, then input,
so they come out the same.

The event's answer is the model's; the response showed the agent its own tool argument
names and none of the tools the version blocks, so the overlays' undo record maps it back
as `runtime.version.overlays.restore_response` did when it was served.
"""

from __future__ import annotations

from typing import Any

from atdp import agent_request, protocol_request
from proxy.protocols.responses import ResponseContext, listed_input, response_object
from runtime.version.overlays import Overlaid, restore_response

__all__ = ["STORED_RESPONSE", "stored_document", "stored_response_of"]

STORED_RESPONSE = "stored_response"  # the key in an llm_call's metadata.extra


def stored_response_of(event: dict[str, Any]) -> dict[str, Any]:
    """The llm_call's record of the response it stored ({"id", "created_at", ...})."""
    return event["metadata"]["extra"][STORED_RESPONSE]


def stored_document(event: dict[str, Any]) -> dict[str, Any]:
    """{"response": the Responses object, "input": the request's input items, each with
    its id} of the response the llm_call `event` (a document, as stored) produced."""
    stored = stored_response_of(event)
    _, request = protocol_request(event["observation"].get("data"))
    context = ResponseContext(stored["id"], request or {}, stored["created_at"])
    completion = _agent_completion(event, streamed=bool(stored.get("stream")))
    response = response_object(completion, context)
    return {"response": response, "input": listed_input(context.request.get("input"), context)}


def _agent_completion(event: dict[str, Any], *, streamed: bool) -> dict[str, Any]:
    """The chat completion the agent was shown, from the model's recorded answer."""
    action, metadata = event.get("action") or {}, event["metadata"]
    extra, tokens = metadata.get("extra") or {}, metadata.get("tokens") or {}
    message: dict[str, Any] = {"role": "assistant", "content": action.get("content")}
    calls = [
        {
            "id": c["id"],
            "type": "function",
            "function": {"name": c["name"], "arguments": c["arguments"]},
        }
        for c in action.get("tool_calls") or []
    ]
    if calls:
        message["tool_calls"] = calls
    choice: dict[str, Any] = {"message": message, "finish_reason": action.get("finish_reason")}
    if extra.get("logprobs") and not streamed:
        choice["logprobs"] = {"content": extra["logprobs"]}
    usage = {
        "prompt_tokens": tokens.get("prompt", 0),
        "completion_tokens": tokens.get("completion", 0),
        "prompt_tokens_details": {"cached_tokens": extra.get("cached_tokens", 0)},
        "completion_tokens_details": {"reasoning_tokens": extra.get("reasoning_tokens", 0)},
    }
    return restore_response({"choices": [choice], "usage": usage}, _overlays(event))


def _overlays(event: dict[str, Any]) -> Overlaid:
    """What restoring the answer needs of the version's overlays: the argument maps, and
    the blocked tools (the agent's that did not go upstream)."""
    observation = event["observation"]
    undo = agent_request(observation.get("data"))
    sent = {tool.get("name") for tool in observation.get("tools") or []}
    declared = {(tool.get("function") or {}).get("name") for tool in undo.get("tools") or []}
    return Overlaid(
        body={},
        model=None,
        argument_maps=undo.get("argument_maps") or {},
        blocked_tools=frozenset(declared - sent),
    )
