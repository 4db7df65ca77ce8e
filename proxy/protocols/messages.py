"""Anthropic's Messages API (`/v1/messages`) as chat completions, and back.

A Messages request has a `system` prompt apart from the turns, content blocks (text,
image, tool_use, tool_result), `tools` with an `input_schema`, and `max_tokens` required.
Tool use and its results live inside user and assistant turns, where chat completions has
assistant tool calls and tool messages: a user turn's tool_result blocks become tool
messages (before the turn's text, as the results answer the previous turn), an assistant
turn's tool_use blocks become its tool calls. Thinking blocks are dropped: a chat model
neither reads nor writes them.

Errors are Anthropic's shape: `{"type": "error", "error": {"type": ..., "message": ...}}`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from proxy.errors import GatewayError

__all__ = [
    "MessagesStream",
    "chat_request",
    "error_document",
    "message_object",
    "new_message_id",
]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    502: "api_error",
    503: "overloaded_error",
    504: "api_error",
}
_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def error_document(status: int, message: str) -> dict[str, Any]:
    kind = _ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _invalid(message: str, param: str) -> GatewayError:
    return GatewayError(400, f"{param}: {message}", param=param, code="invalid_value")


# --- request -------------------------------------------------------------------------------


def chat_request(body: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions request for a Messages request."""
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        raise _invalid("required, a positive integer.", "max_tokens")
    turns = body.get("messages")
    if not isinstance(turns, list) or not turns:
        raise _invalid("required, a non-empty list of turns.", "messages")
    messages: list[dict[str, Any]] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": _system_text(system)})
    for index, turn in enumerate(turns):
        messages += _chat_messages(turn, f"messages.{index}")
    chat: dict[str, Any] = {
        "model": body.get("model"),
        "messages": messages,
        "max_tokens": body["max_tokens"],
    }
    for key in ("temperature", "top_p"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("stop_sequences"):
        chat["stop"] = list(body["stop_sequences"])
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    if metadata.get("user_id"):
        chat["user"] = str(metadata["user_id"])
    # Other keys (`task_type`, `session_id`) mean what they mean on chat completions.
    rest = {key: value for key, value in metadata.items() if key != "user_id"}
    if rest:
        chat["metadata"] = rest
    if body.get("tools"):
        chat["tools"] = [_chat_tool(tool, i) for i, tool in enumerate(body["tools"])]
    choice = body.get("tool_choice")
    if choice is not None:
        _apply_tool_choice(chat, choice)
    return chat


def _system_text(system: Any) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    raise _invalid("must be a string or a list of text blocks.", "system")


def _chat_messages(turn: Any, where: str) -> list[dict[str, Any]]:
    role = turn.get("role") if isinstance(turn, dict) else None
    if role not in {"user", "assistant"}:
        raise _invalid("must be user or assistant.", f"{where}.role")
    content = turn.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise _invalid("must be a string or a list of content blocks.", f"{where}.content")
    results, parts, calls = [], [], []
    for index, block in enumerate(content):
        at = f"{where}.content.{index}"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text") or "")})
        elif kind == "image":
            parts.append(_image_part(block, at))
        elif kind == "tool_use" and role == "assistant":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append(
                {
                    "id": _required(block, "id", at),
                    "type": "function",
                    "function": {"name": _required(block, "name", at), "arguments": arguments},
                }
            )
        elif kind == "tool_result" and role == "user":
            results.append(_tool_message(block, at))
        elif kind in {"thinking", "redacted_thinking"}:
            continue
        else:
            raise _invalid(f"content blocks of type {kind!r} are not supported here.", at)
    messages = results
    if role == "assistant":
        text = "".join(p.get("text", "") for p in parts) or None
        if text is not None or calls:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
    elif parts:
        texts_only = all(p["type"] == "text" for p in parts)
        joined = "\n\n".join(p["text"] for p in parts) if texts_only else parts
        messages.append({"role": "user", "content": joined})
    return messages


def _required(block: dict[str, Any], key: str, where: str) -> str:
    value = block.get(key)
    if not isinstance(value, str) or not value:
        raise _invalid("required, a non-empty string.", f"{where}.{key}")
    return value


def _image_part(block: dict[str, Any], where: str) -> dict[str, Any]:
    source = block.get("source") or {}
    if source.get("type") == "base64" and source.get("data"):
        url = f"data:{source.get('media_type', 'image/png')};base64,{source['data']}"
    elif source.get("type") == "url" and source.get("url"):
        url = source["url"]
    else:
        raise _invalid("an image needs a base64 or url source.", f"{where}.source")
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_message(block: dict[str, Any], where: str) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, list):
        content = "".join(
            b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    text = "" if content is None else str(content)
    if block.get("is_error"):
        # Chat completions has no error flag on a tool message: say it in the content, in
        # the shape the gateway's capture recognises as a failed call.
        text = json.dumps({"error": text}, ensure_ascii=False)
    return {"role": "tool", "tool_call_id": _required(block, "tool_use_id", where), "content": text}


def _chat_tool(tool: Any, index: int) -> dict[str, Any]:
    where = f"tools.{index}"
    if not isinstance(tool, dict) or tool.get("type") not in {None, "custom"}:
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise _invalid(
            f"tools of type {kind!r} run on Anthropic's side and are not available through "
            "this gateway; declare it as a custom tool your agent executes.",
            where,
        )
    function: dict[str, Any] = {
        "name": _required(tool, "name", where),
        "parameters": tool.get("input_schema") or {"type": "object", "properties": {}},
    }
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _apply_tool_choice(chat: dict[str, Any], choice: Any) -> None:
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind == "auto":
        chat["tool_choice"] = "auto"
    elif kind == "any":
        chat["tool_choice"] = "required"
    elif kind == "none":
        chat["tool_choice"] = "none"
    elif kind == "tool" and choice.get("name"):
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise _invalid("must be of type auto, any, tool (with a name) or none.", "tool_choice")
    if choice.get("disable_parallel_tool_use"):
        chat["parallel_tool_calls"] = False


# --- answer --------------------------------------------------------------------------------


@dataclass
class MessageContext:
    id: str
    model: str
    stop_sequences: tuple[str, ...] = ()


def message_object(completion: dict[str, Any], context: MessageContext) -> dict[str, Any]:
    """The Messages answer for a chat completion (its first choice)."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        content.append(_tool_use(call))
    stop_reason, stop_sequence = _stop(choice, message.get("content") or "", context)
    return {
        "id": context.id,
        "type": "message",
        "role": "assistant",
        "model": context.model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": _usage(completion.get("usage")),
    }


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "type": "tool_use",
        "id": call.get("id") or f"toolu_{uuid.uuid4().hex}",
        "name": function.get("name") or "",
        "input": _arguments(function.get("arguments")),
    }


def _arguments(text: Any) -> dict[str, Any]:
    """Tool-call arguments as the object Anthropic's `input` is; what does not parse as
    one is kept whole under `_raw`, so nothing the model said is lost."""
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return {"_raw": str(text)}
    return parsed if isinstance(parsed, dict) else {"_raw": str(text)}


def _stop(
    choice: dict[str, Any], text: str, context: MessageContext
) -> tuple[str | None, str | None]:
    reason = choice.get("finish_reason")
    matched = choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) else None
    if reason == "stop" and context.stop_sequences and matched in context.stop_sequences:
        return "stop_sequence", matched
    if reason == "stop" and context.stop_sequences and not matched:
        return "end_turn", None
    return _STOP_REASONS.get(reason or "", "end_turn" if reason else None), None


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {
        "input_tokens": int(usage.get("prompt_tokens") or 0) - cached,
        "output_tokens": int(usage.get("completion_tokens") or 0),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
    }


# --- streaming -----------------------------------------------------------------------------


class MessagesStream:
    """Chat-completion chunks in, Anthropic stream events out: message_start; per content
    block content_block_start, content_block_delta..., content_block_stop; message_delta
    (stop reason and usage); message_stop. Only the first choice is streamed."""

    def __init__(self, context: MessageContext) -> None:
        self.context = context
        self.content: list[dict[str, Any]] = []
        self._open: tuple[str, int | None] | None = None  # ("text", None) or ("tool", index)
        self._calls: dict[int, int] = {}  # chat tool-call index -> content block index
        self._partial: dict[int, str] = {}  # block index -> arguments so far
        self._usage: dict[str, Any] | None = None
        self._finish: str | None = None
        self._text = ""

    def start(self) -> Iterator[tuple[str, dict[str, Any]]]:
        message = {
            "id": self.context.id,
            "type": "message",
            "role": "assistant",
            "model": self.context.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": _usage(None),
        }
        yield "message_start", {"type": "message_start", "message": message}
        yield "ping", {"type": "ping"}

    def chunk(self, chunk: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                yield from self._text_delta(delta["content"])
            for call in delta.get("tool_calls") or []:
                yield from self._call_delta(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]

    def _begin(self, block: dict[str, Any], opened: tuple[str, int | None]):
        yield from self._stop_block()
        self.content.append(block)
        self._open = opened
        empty = {**block, "input": {}} if block["type"] == "tool_use" else block
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": len(self.content) - 1,
                "content_block": dict(empty),
            },
        )

    def _text_delta(self, text: str) -> Iterator[tuple[str, dict[str, Any]]]:
        if self._open != ("text", None):
            yield from self._begin({"type": "text", "text": ""}, ("text", None))
        self.content[-1]["text"] += text
        self._text += text
        yield (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": len(self.content) - 1,
                "delta": {"type": "text_delta", "text": text},
            },
        )

    def _call_delta(self, call: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        index = call.get("index", 0)
        function = call.get("function") or {}
        if index not in self._calls:
            block = {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{uuid.uuid4().hex}",
                "name": function.get("name") or "",
                "input": {},
            }
            yield from self._begin(block, ("tool", index))
            self._calls[index] = len(self.content) - 1
            self._partial[self._calls[index]] = ""
        position = self._calls[index]
        if function.get("arguments"):
            self._partial[position] += function["arguments"]
            yield (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": position,
                    "delta": {"type": "input_json_delta", "partial_json": function["arguments"]},
                },
            )

    def _stop_block(self) -> Iterator[tuple[str, dict[str, Any]]]:
        if self._open is None:
            return
        index = len(self.content) - 1 if self._open[0] == "text" else self._calls[self._open[1]]
        self._open = None
        if self.content[index]["type"] == "tool_use":
            self.content[index]["input"] = _arguments(self._partial[index])
        yield "content_block_stop", {"type": "content_block_stop", "index": index}

    def finish(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """The closing events; `self.message` is the whole answer afterwards."""
        yield from self._stop_block()
        choice = {"finish_reason": self._finish}
        stop_reason, stop_sequence = _stop(choice, self._text, self.context)
        usage = _usage(self._usage)
        self.message = {
            "id": self.context.id,
            "type": "message",
            "role": "assistant",
            "model": self.context.model,
            "content": self.content,
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                "usage": usage,  # the prompt is only counted once the stream has run
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def fail(self, message: str) -> Iterator[tuple[str, dict[str, Any]]]:
        yield "error", error_document(502, message)
