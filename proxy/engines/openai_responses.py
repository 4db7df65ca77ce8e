"""The engine for an upstream that speaks OpenAI's Responses API (`/v1/responses`): models
served only there, or a server whose Responses endpoint is the one to use.

As with the `anthropic` engine, the version's chat-completions request is sent in the
upstream's protocol and its answer (or stream) comes back as a chat completion (or its
chunks), so overlays and capture are the same for every upstream. Each call is sent with
`store: false`: the gateway keeps the conversation (the agent's own history, or its stored
responses), and the upstream keeps nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from proxy.engines.base import UpstreamError
from proxy.engines.openai_compat import OpenAICompatEngine, json_event

__all__ = ["ResponsesEngine", "chat_completion", "responses_request"]

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class ResponsesEngine(OpenAICompatEngine):
    """POSTs /responses to one server over one pooled session (see `OpenAICompatEngine`)."""

    def __init__(self, base_url: str, api_key: str | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, api_key, **kwargs)
        self._url = f"{self.base_url}/responses"

    answer_name = "response"

    def _request(self, body: dict, model: str | None, *, stream: bool) -> dict:
        return responses_request(body, model, stream=stream)

    def _completion(self, answer: Any) -> dict:
        return chat_completion(answer)

    def _stream_reader(self) -> Callable[[str], tuple[list[dict], bool]]:
        return _ChunkBuilder().read


# --- chat completions -> Responses ---------------------------------------------------------


def responses_request(body: dict[str, Any], model: str | None, *, stream: bool) -> dict[str, Any]:
    """The Responses request for a chat-completions request."""
    request: dict[str, Any] = {
        "model": model or body.get("model"),
        "input": _items(body.get("messages") or []),
        "store": False,
    }
    for key in ("temperature", "top_p", "parallel_tool_calls", "user", "top_logprobs"):
        if body.get(key) is not None:
            request[key] = body[key]
    limit = body.get("max_completion_tokens") or body.get("max_tokens")
    if limit:
        request["max_output_tokens"] = limit
    if body.get("tools"):
        request["tools"] = [{"type": "function", **t.get("function", {})} for t in body["tools"]]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and (choice.get("function") or {}).get("name"):
        request["tool_choice"] = {"type": "function", "name": choice["function"]["name"]}
    elif choice is not None:
        request["tool_choice"] = choice
    text_format = _text_format(body.get("response_format"))
    if text_format is not None:
        request["text"] = {"format": text_format}
    if stream:
        request["stream"] = True
    return request


def _items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            output = message.get("content")
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id") or "",
                    "output": output if isinstance(output, str) else json.dumps(output),
                }
            )
            continue
        content = _content(message.get("content"), assistant=role == "assistant")
        if content:
            items.append({"type": "message", "role": role, "content": content})
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id") or "",
                    "name": function.get("name") or "",
                    "arguments": function.get("arguments") or "",
                }
            )
    return items


def _content(content: Any, *, assistant: bool) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    text_type = "output_text" if assistant else "input_text"
    parts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append({"type": text_type, "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            image = part.get("image_url") or {}
            parts.append({"type": "input_image", "image_url": image.get("url", "")})
    return parts


def _text_format(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_object":
        return {"type": "json_object"}
    if response_format.get("type") == "json_schema":
        return {"type": "json_schema", **(response_format.get("json_schema") or {})}
    return None


# --- Responses -> chat completions ---------------------------------------------------------


def chat_completion(response: dict[str, Any]) -> dict[str, Any]:
    """The chat completion for a Responses object."""
    if response.get("status") == "failed":
        error = response.get("error") or {}
        raise UpstreamError(None, str(error.get("message") or "the response failed"), response)
    text, calls = "", []
    for item in response["output"]:
        if item.get("type") == "message":
            parts = item.get("content") or []
            text += "".join(p.get("text", "") for p in parts if p.get("type") == "output_text")
        elif item.get("type") == "function_call":
            calls.append(_call(item))
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": response.get("id"),
        "object": "chat.completion",
        "model": response.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(response, calls)}],
        "usage": _usage(response.get("usage") or {}),
    }


def _call(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item.get("call_id") or item.get("id") or "",
        "type": "function",
        "function": {"name": item.get("name") or "", "arguments": item.get("arguments") or ""},
    }


def _finish(response: dict[str, Any], calls: list) -> str:
    if response.get("status") == "incomplete":
        reason = (response.get("incomplete_details") or {}).get("reason")
        return _INCOMPLETE.get(reason or "", "length")
    return "tool_calls" if calls else "stop"


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    prompt = int(usage.get("input_tokens") or 0)
    completion = int(usage.get("output_tokens") or 0)
    cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


_FINAL = {"response.completed", "response.incomplete", "response.failed"}


class _ChunkBuilder:
    """Responses stream events in, chat.completion.chunk objects out."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.model: str | None = None
        self.calls: dict[int, int] = {}  # output index -> tool-call index

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
        return self.of(event), event.get("type") in _FINAL

    def of(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == "error":
            raise UpstreamError(None, str(event.get("message") or "error in stream"), event)
        if kind == "response.created":
            response = event.get("response") or {}
            self.id, self.model = response.get("id"), response.get("model")
            return [self._chunk({"role": "assistant"})]
        if kind == "response.output_text.delta":
            return [self._chunk({"content": event.get("delta", "")})]
        if kind == "response.output_item.added":
            item = event.get("item") or {}
            if item.get("type") != "function_call":
                return []
            index = self.calls[event.get("output_index", 0)] = len(self.calls)
            call = {**_call({**item, "arguments": ""}), "index": index}
            return [self._chunk({"tool_calls": [call]})]
        if kind == "response.function_call_arguments.delta":
            index = self.calls.get(event.get("output_index", 0))
            if index is None:
                return []
            call = {"index": index, "function": {"arguments": event.get("delta", "")}}
            return [self._chunk({"tool_calls": [call]})]
        if kind in _FINAL:
            response = event.get("response") or {}
            if kind == "response.failed":
                error = response.get("error") or {}
                message = str(error.get("message") or "the response failed")
                raise UpstreamError(None, message, response)
            calls = [i for i in response.get("output") or [] if i.get("type") == "function_call"]
            last = self._chunk({}, _finish(response, calls))
            last["usage"] = _usage(response.get("usage") or {})
            return [last]
        return []
