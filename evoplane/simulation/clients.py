"""The SDKs a team may write its agent on, each pointed at the gateway by its base URL.

Every team keeps its conversation its own way; the simulated agents keep it as chat
messages, and each client here speaks its protocol with that SDK the way such an agent
does: chat completions on `openai`, the Responses API on `openai` (sending the whole
conversation as input items, as the OpenAI Agents SDK does), the Messages API on
`anthropic`. Each returns the assistant's turn as a chat message, with what the gateway's
headers said served it.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Protocol

import openai

__all__ = ["ModelClient", "Served", "client_for"]

Served = dict[str, Any]  # event_id, trajectory_id, version from the gateway's headers
MAX_TOKENS = 512


class ModelClient(Protocol):
    def complete(
        self,
        agent: str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        session: str,
        metadata: dict[str, str] | None,
        stream: bool | None,
        **sampling: Any,
    ) -> tuple[dict[str, Any], Served]:
        """The assistant's turn for `messages`, and what the gateway said served it.

        Args:
            tools: the tools offered (None: none, as a request that must not act).
            stream: ask for a streamed answer; None leaves it to the API's default.
            sampling: decoding parameters as the API names them (`temperature`, `seed`,
                `max_tokens`), where the agent sets them.
        """
        ...

    def close(self) -> None: ...


def client_for(
    protocol: Literal["chat", "responses", "messages"], gateway: str, key: str
) -> ModelClient:
    """The client a team on `protocol` writes; `gateway` is the OpenAI-style base URL."""
    if protocol == "messages":
        return MessagesClient(gateway, key)
    sdk = openai.OpenAI(base_url=gateway, api_key=key, max_retries=2, timeout=120)
    return ResponsesClient(sdk) if protocol == "responses" else ChatClient(sdk)


def _served(headers: Any) -> Served:
    # A stream's headers leave before its event exists: no event id, and the trajectory
    # only from the session's second turn on.
    return {
        "event_id": headers.get("X-Evoplane-Event-Id"),
        "trajectory_id": headers.get("X-Evoplane-Trajectory-Id"),
        "version": headers["X-Evoplane-Version"],
    }


def _assistant(text: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# --- chat completions ---------------------------------------------------------------------


class ChatClient:
    def __init__(self, sdk: openai.OpenAI) -> None:
        self.sdk = sdk

    def complete(self, agent, messages, tools, *, session, metadata, stream, **sampling):
        extra = {"metadata": metadata} if metadata else {}
        if tools is not None:
            extra["tools"] = tools
        if stream is not None:
            extra["stream"] = stream
        raw = self.sdk.chat.completions.with_raw_response.create(
            model=agent,
            messages=messages,
            extra_headers={"X-Session-Id": session},
            **extra,
            **sampling,
        )
        parsed = raw.parse()
        if not stream:
            return parsed.choices[0].message.model_dump(exclude_none=True), _served(raw.headers)
        return _chat_streamed(parsed), _served(raw.headers)

    def close(self) -> None:
        self.sdk.close()


def _chat_streamed(stream: Any) -> dict[str, Any]:
    """The assistant message a stream spells out, as the SDK's users assemble it."""
    content: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            content.append(delta.content)
        for part in delta.tool_calls or []:
            call = calls.setdefault(part.index, _call("", "", ""))
            call["id"] = part.id or call["id"]
            if part.function is not None:
                call["function"]["name"] += part.function.name or ""
                call["function"]["arguments"] += part.function.arguments or ""
    return _assistant("".join(content), [calls[index] for index in sorted(calls)])


# --- the Responses API --------------------------------------------------------------------


class ResponsesClient:
    def __init__(self, sdk: openai.OpenAI) -> None:
        self.sdk = sdk

    def complete(self, agent, messages, tools, *, session, metadata, stream, **sampling):
        extra = {"metadata": metadata} if metadata else {}
        raw = self.sdk.responses.with_raw_response.create(
            model=agent,
            input=_input_items(messages),
            tools=[{"type": "function", **tool["function"]} for tool in tools or []],
            stream=bool(stream),
            extra_headers={"X-Session-Id": session},
            **extra,
            **sampling,
        )
        parsed = raw.parse()
        if stream:
            parsed = next(e.response for e in parsed if e.type.startswith("response.complete"))
        text = "".join(
            part.text
            for item in parsed.output
            if item.type == "message"
            for part in item.content
            if part.type == "output_text"
        )
        calls = [
            _call(item.call_id, item.name, item.arguments)
            for item in parsed.output
            if item.type == "function_call"
        ]
        return _assistant(text, calls), _served(raw.headers)

    def close(self) -> None:
        self.sdk.close()


def _input_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool":
            output = {"call_id": message["tool_call_id"], "output": message["content"]}
            items.append({"type": "function_call_output", **output})
            continue
        if message.get("content"):
            items.append({"role": message["role"], "content": message["content"]})
        for call in message.get("tool_calls") or []:
            function = call["function"]
            items.append(
                {
                    "type": "function_call",
                    "call_id": call["id"],
                    "name": function["name"],
                    "arguments": function["arguments"],
                }
            )
    return items


# --- Anthropic's Messages API -------------------------------------------------------------


class MessagesClient:
    def __init__(self, gateway: str, key: str) -> None:
        import anthropic  # a test dependency, as the suite's other clients' SDK is

        self.sdk = anthropic.Anthropic(
            base_url=gateway.removesuffix("/v1"), api_key=key, max_retries=2, timeout=120
        )

    def complete(self, agent, messages, tools, *, session, metadata, stream, **sampling):
        system = [m["content"] for m in messages if m["role"] == "system"]
        extra: dict[str, Any] = {"metadata": metadata} if metadata else {}
        if system:
            extra["system"] = "\n\n".join(system)
        raw = self.sdk.messages.with_raw_response.create(
            model=agent,
            messages=_turns(messages),
            tools=[_anthropic_tool(tool["function"]) for tool in tools or []],
            stream=bool(stream),
            extra_headers={"X-Session-Id": session},
            **{"max_tokens": MAX_TOKENS, **extra, **sampling},
        )
        parsed = raw.parse()
        blocks = _streamed_blocks(parsed) if stream else [b.model_dump() for b in parsed.content]
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [
            _call(b["id"], b["name"], json.dumps(b["input"]))
            for b in blocks
            if b["type"] == "tool_use"
        ]
        return _assistant(text, calls), _served(raw.headers)

    def close(self) -> None:
        self.sdk.close()


def _anthropic_tool(function: dict[str, Any]) -> dict[str, Any]:
    tool = {"name": function["name"], "input_schema": function.get("parameters") or {}}
    if function.get("description"):
        tool["description"] = function["description"]
    return tool


def _turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as Anthropic turns: tool results are a user turn of tool_result
    blocks, an assistant's tool calls its tool_use blocks."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            continue
        if role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message["tool_call_id"],
                "content": message["content"],
            }
            if turns and turns[-1]["role"] == "user" and isinstance(turns[-1]["content"], list):
                turns[-1]["content"].append(block)
            else:
                turns.append({"role": "user", "content": [block]})
            continue
        blocks: list[dict[str, Any]] = []
        if message.get("content"):
            blocks.append({"type": "text", "text": message["content"]})
        for call in message.get("tool_calls") or []:
            arguments = json.loads(call["function"]["arguments"] or "{}")
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "input": arguments if isinstance(arguments, dict) else {},
                }
            )
        turns.append({"role": role, "content": blocks})
    return turns


def _streamed_blocks(stream: Any) -> list[dict[str, Any]]:
    """The content blocks a Messages stream spells out, as the SDK's users assemble them."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for event in stream:
        if event.type == "content_block_start":
            blocks[event.index] = event.content_block.model_dump()
            partial[event.index] = ""
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                blocks[event.index]["text"] += event.delta.text
            elif event.delta.type == "input_json_delta":
                partial[event.index] += event.delta.partial_json
    for index, block in blocks.items():
        if block["type"] == "tool_use" and partial[index]:
            try:
                block["input"] = json.loads(partial[index])
            except ValueError:
                block["input"] = {}
    return [blocks[index] for index in sorted(blocks)]
