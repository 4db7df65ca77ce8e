"""The engine for Anthropic's Messages API: Claude, or any server that speaks `/v1/messages`.

The gateway's pipeline works in chat completions (see `proxy.protocols`): this engine turns
the chat-completions request a version sends upstream into a Messages request, and the
answer (or each streamed event) back into a chat completion (or its chunks). So an agent on
any of the gateway's protocols can be served by a Claude model, with the version's
overlays applied as for any other upstream.

System messages become the `system` prompt; tool messages become a user turn of
tool_result blocks; an assistant's tool calls its tool_use blocks; `max_tokens`, which the
Messages API requires, defaults to `DEFAULT_MAX_TOKENS` when the request names none.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from proxy.engines.base import UpstreamError
from proxy.engines.openai_compat import OpenAICompatEngine, json_event

__all__ = ["AnthropicEngine", "chat_completion", "messages_request"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
    "pause_turn": "stop",
}


class AnthropicEngine(OpenAICompatEngine):
    """POSTs /messages to one Messages API server over one pooled session.

    Args:
        base_url: the API root, e.g. "https://api.anthropic.com/v1".
        api_key: sent as `x-api-key` (and `anthropic-version`).
        (the rest as `OpenAICompatEngine`)
    """

    def __init__(self, base_url: str, api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, None, **kwargs)
        self._url = f"{self.base_url}/messages"
        self._headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            self._headers["x-api-key"] = api_key

    answer_name = "message"

    def _request(self, body: dict, model: str | None, *, stream: bool) -> dict:
        return messages_request(body, model, stream=stream)

    def _completion(self, answer: Any) -> dict:
        return chat_completion(answer)

    def _stream_reader(self) -> Callable[[str], tuple[list[dict], bool]]:
        return _ChunkBuilder().read


# --- chat completions -> Messages ----------------------------------------------------------


def messages_request(body: dict[str, Any], model: str | None, *, stream: bool) -> dict[str, Any]:
    """The Messages request for a chat-completions request."""
    system = [
        _text_of(m.get("content"))
        for m in body.get("messages") or []
        if m.get("role") in {"system", "developer"}
    ]
    request: dict[str, Any] = {
        "model": model or body.get("model"),
        "max_tokens": body.get("max_completion_tokens")
        or body.get("max_tokens")
        or DEFAULT_MAX_TOKENS,
        "messages": _turns(body.get("messages") or []),
    }
    if system:
        request["system"] = "\n\n".join(system)
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            request[key] = body[key]
    stop = body.get("stop")
    if stop:
        request["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
    if body.get("user"):
        request["metadata"] = {"user_id": str(body["user"])}
    if body.get("tools"):
        request["tools"] = [_tool(t) for t in body["tools"]]
        choice = _tool_choice(body.get("tool_choice"), body.get("parallel_tool_calls"))
        if choice is not None:
            request["tool_choice"] = choice
    if stream:
        request["stream"] = True
    return request


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)


def _turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages as alternating Messages turns (consecutive turns of one role merge)."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role in {"system", "developer"}:
            continue
        if role == "tool":
            role, blocks = "user", [_tool_result(message)]
        elif role == "assistant":
            blocks = _assistant_blocks(message)
        else:
            role, blocks = "user", _user_blocks(message.get("content"))
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _user_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            blocks.append(_image((part.get("image_url") or {}).get("url") or ""))
    return blocks


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        source = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def _assistant_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    text = _text_of(message.get("content"))
    if text:
        blocks.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except ValueError:
            arguments = {"_raw": function.get("arguments")}
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or "",
                "name": function.get("name") or "",
                "input": arguments if isinstance(arguments, dict) else {"_raw": arguments},
            }
        )
    return blocks


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id") or "",
        "content": _text_of(message.get("content")),
    }


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    converted = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }
    if function.get("description"):
        converted["description"] = function["description"]
    return converted


def _tool_choice(choice: Any, parallel: Any) -> dict[str, Any] | None:
    if choice is None and parallel is not False:
        return None
    if choice == "none":
        return {"type": "none"}
    if choice == "required":
        converted: dict[str, Any] = {"type": "any"}
    elif isinstance(choice, dict) and (choice.get("function") or {}).get("name"):
        converted = {"type": "tool", "name": choice["function"]["name"]}
    else:
        converted = {"type": "auto"}
    if parallel is False:
        converted["disable_parallel_tool_use"] = True
    return converted


# --- Messages -> chat completions ----------------------------------------------------------


def chat_completion(message: dict[str, Any]) -> dict[str, Any]:
    """The chat completion for a Messages answer."""
    text = "".join(b.get("text", "") for b in message["content"] if b.get("type") == "text")
    calls = [
        {
            "id": block.get("id") or "",
            "type": "function",
            "function": {
                "name": block.get("name") or "",
                "arguments": json.dumps(block.get("input") or {}),
            },
        }
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]
    reply: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        reply["tool_calls"] = calls
    return {
        "id": message.get("id"),
        "object": "chat.completion",
        "model": message.get("model"),
        "choices": [
            {"index": 0, "message": reply, "finish_reason": _finish(message.get("stop_reason"))}
        ],
        "usage": _usage(message.get("usage") or {}),
    }


def _finish(stop_reason: str | None) -> str | None:
    return _FINISH.get(stop_reason or "", "stop") if stop_reason else None


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    cached = int(usage.get("cache_read_input_tokens") or 0)
    prompt = int(usage.get("input_tokens") or 0) + cached
    prompt += int(usage.get("cache_creation_input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


class _ChunkBuilder:
    """Messages stream events in, chat.completion.chunk objects out."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.usage: dict[str, Any] = {}
        self.calls: dict[int, int] = {}  # content block index -> tool-call index

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    def read(self, data: str) -> tuple[list[dict[str, Any]], bool]:
        """The chunks of one event's data, and whether the stream has ended."""
        event = json_event(data)
        return self.of(event), event.get("type") == "message_stop"

    def of(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == "error":
            error = event.get("error") or {}
            raise UpstreamError(None, str(error.get("message") or "error in stream"), event)
        if kind == "message_start":
            message = event.get("message") or {}
            self.id, self.model = message.get("id"), message.get("model")
            self.usage.update(message.get("usage") or {})
            return [self._chunk({"role": "assistant"})]
        if kind == "content_block_start":
            block = event.get("content_block") or {}
            if block.get("type") == "tool_use":
                index = self.calls[event.get("index", 0)] = len(self.calls)
                call = {
                    "index": index,
                    "id": block.get("id"),
                    "type": "function",
                    "function": {"name": block.get("name") or "", "arguments": ""},
                }
                return [self._chunk({"tool_calls": [call]})]
            if block.get("type") == "text" and block.get("text"):
                return [self._chunk({"content": block["text"]})]
            return []
        if kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                return [self._chunk({"content": delta.get("text", "")})]
            if delta.get("type") == "input_json_delta" and event.get("index") in self.calls:
                call = {
                    "index": self.calls[event["index"]],
                    "function": {"arguments": delta.get("partial_json", "")},
                }
                return [self._chunk({"tool_calls": [call]})]
            return []
        if kind == "message_delta":
            self.usage.update(event.get("usage") or {})
            stop = (event.get("delta") or {}).get("stop_reason")
            last = self._chunk({}, _finish(stop) or "stop")
            last["usage"] = _usage(self.usage)
            return [last]
        return []  # ping, content_block_stop, message_stop
