"""The OpenAI Responses API (`/v1/responses`) as chat completions, and back.

A Responses request is an `input` (text, or a list of items: messages, function calls and
their outputs), `instructions`, function `tools` and the options chat completions has under
other names. `previous_response_id` continues a stored response: the conversation so far is
kept, in chat form, with the stored response, and put before the new input. Instructions
are not carried over (as OpenAI's API does not): each request's own apply.

Only what has a chat-completions equivalent is served. Hosted tools (web search, file
search, computer use, MCP) run on OpenAI's side and are refused with a 400 naming them, as
is any input item a chat model cannot be shown; reasoning items are dropped (a chat model
neither reads nor writes them).
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import GatewayError

__all__ = [
    "ResponsesStream",
    "chat_request",
    "input_items",
    "listed_input",
    "new_response_id",
    "response_object",
]

# Request fields with the same meaning (and name) in chat completions.
_SAME = ("temperature", "top_p", "parallel_tool_calls", "user", "metadata", "top_logprobs")


def new_response_id() -> str:
    """128 random bits, as a uuid4 has, from the process's own generator (reseeded in every
    forked worker): a uuid4 reads the OS's entropy on every call, measurable per request.
    Unique is all an id needs; a response is read only by its own tenant."""
    return f"resp_{random.getrandbits(128):032x}"


def _invalid(message: str, param: str) -> GatewayError:
    return GatewayError(400, message, param=param, code="invalid_value")


# --- request -------------------------------------------------------------------------------


def chat_request(body: dict[str, Any], history: list[dict[str, Any]] | None = None) -> dict:
    """The chat-completions request for a Responses request.

    `history`: the conversation of the response `previous_response_id` names (chat
    messages, its answer included), put between the instructions and the new input.
    """
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    elif isinstance(instructions, list):
        messages += chat_messages(instructions, "instructions")
    messages += history or []
    messages += chat_messages(input_items(body.get("input")), "input")
    if not messages:
        raise _invalid("input: give the text or the items to respond to.", "input")
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    for key in _SAME:
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("top_logprobs") is not None:
        chat["logprobs"] = True
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        chat["tools"] = [_chat_tool(tool, i) for i, tool in enumerate(body["tools"])]
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _chat_tool_choice(body["tool_choice"])
    response_format = _response_format((body.get("text") or {}).get("format"))
    if response_format is not None:
        chat["response_format"] = response_format
    return chat


def input_items(value: Any) -> list[dict[str, Any]]:
    """`input` as a list of items: text is one user message."""
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        return value
    raise _invalid("input: must be a string or a list of input items.", "input")


def listed_input(value: Any, context: ResponseContext) -> list[dict[str, Any]]:
    """A request's input as the API lists its items: each with an id (the response's own
    where it had none) and, for messages, a type and content parts."""
    listed = []
    for item in input_items(value):
        item = dict(item)
        kind = item.setdefault("type", "message")
        if "id" not in item:
            prefix = {"message": "msg", "function_call": "fc"}.get(kind, "item")
            item["id"] = context.item_id(prefix)
        if kind == "message" and isinstance(item.get("content"), str):
            text_type = "output_text" if item.get("role") == "assistant" else "input_text"
            item["content"] = [{"type": text_type, "text": item["content"]}]
        listed.append(item)
    return listed


def chat_messages(items: list[dict[str, Any]], param: str) -> list[dict[str, Any]]:
    """Input items as chat messages: consecutive function calls join one assistant message
    (the one just before, when it is the assistant's text); their outputs become tool
    messages."""
    messages: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        where = f"{param}.{index}"
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            messages.append(_chat_message(item, where))
        elif kind == "function_call":
            call = {
                "id": _required(item, "call_id", where),
                "type": "function",
                "function": {
                    "name": _required(item, "name", where),
                    "arguments": item.get("arguments") or "",
                },
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and "tool_call_id" not in last:
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": _required(item, "call_id", where),
                    "content": output if isinstance(output, str) else _text_parts(output, where),
                }
            )
        elif kind == "reasoning":
            continue  # a chat model neither reads nor writes reasoning items
        else:
            raise _invalid(
                f"{where}: input items of type {kind!r} are not supported by this gateway "
                "(supported: message, function_call, function_call_output, reasoning).",
                where,
            )
    return messages


def _required(item: dict[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise _invalid(f"{where}.{key}: required, a non-empty string.", f"{where}.{key}")
    return value


def _chat_message(item: dict[str, Any], where: str) -> dict[str, Any]:
    role = item.get("role")
    if role not in {"user", "system", "developer", "assistant"}:
        raise _invalid(
            f"{where}.role: must be one of user, system, developer, assistant.", f"{where}.role"
        )
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    parts = [_chat_part(part, f"{where}.content.{i}") for i, part in enumerate(content or [])]
    if all(part["type"] == "text" for part in parts):
        text = "".join(part["text"] for part in parts)
        return {"role": role, "content": text}
    return {"role": role, "content": parts}


def _chat_part(part: Any, where: str) -> dict[str, Any]:
    kind = part.get("type") if isinstance(part, dict) else None
    if kind in {"input_text", "output_text", "text"}:
        return {"type": "text", "text": str(part.get("text") or "")}
    if kind == "refusal":
        return {"type": "text", "text": str(part.get("refusal") or "")}
    if kind == "input_image":
        url = part.get("image_url") or (
            f"openai-file:{part['file_id']}" if part.get("file_id") else None
        )
        if not url:
            raise _invalid(f"{where}: an input_image needs an image_url.", where)
        image = {"url": url, **({"detail": part["detail"]} if part.get("detail") else {})}
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        file = {k: part[k] for k in ("file_data", "file_id", "filename") if part.get(k)}
        return {"type": "file", "file": file}
    raise _invalid(f"{where}: content parts of type {kind!r} are not supported.", where)


def _text_parts(value: Any, where: str) -> str:
    """A function call's output given as content parts, as the text a tool message holds."""
    if isinstance(value, list):
        parts = [_chat_part(part, f"{where}.output.{i}") for i, part in enumerate(value)]
        return "".join(part.get("text", "") for part in parts)
    return "" if value is None else str(value)


def _chat_tool(tool: Any, index: int) -> dict[str, Any]:
    where = f"tools.{index}"
    kind = tool.get("type") if isinstance(tool, dict) else None
    if kind != "function":
        raise _invalid(
            f"{where}: tools of type {kind!r} run on OpenAI's side and are not available "
            "through this gateway; declare it as a function tool your agent executes.",
            where,
        )
    function = {"name": tool.get("name")}
    for key in ("description", "parameters", "strict"):
        if tool.get(key) is not None:
            function[key] = tool[key]
    return {"type": "function", "function": function}


def _chat_tool_choice(choice: Any) -> Any:
    if isinstance(choice, str):
        if choice not in {"auto", "none", "required"}:
            message = "tool_choice: must be auto, none, required or a function."
            raise _invalid(message, "tool_choice")
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and choice.get("name"):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise _invalid(
        "tool_choice: only auto, none, required or {type: function, name} are supported.",
        "tool_choice",
    )


def _response_format(spec: Any) -> dict[str, Any] | None:
    if spec is None or (isinstance(spec, dict) and spec.get("type") == "text"):
        return None
    if isinstance(spec, dict) and spec.get("type") == "json_object":
        return {"type": "json_object"}
    if isinstance(spec, dict) and spec.get("type") == "json_schema":
        schema = {k: spec[k] for k in ("name", "schema", "strict", "description") if k in spec}
        return {"type": "json_schema", "json_schema": schema}
    raise _invalid("text.format: must be of type text, json_object or json_schema.", "text.format")


# --- answer --------------------------------------------------------------------------------


@dataclass
class ResponseContext:
    """What a response object repeats of its request, and its own id and time."""

    id: str
    request: dict[str, Any]
    created_at: int = field(default_factory=lambda: int(time.time()))
    _items: int = field(default=0, repr=False)

    def item_id(self, prefix: str) -> str:
        """A new id for one of this response's items ("msg", "fc"), its input's included:
        the response's own random part and a count, unique without drawing randomness
        for each item (which took measurable time on every call)."""
        self._items += 1
        return f"{prefix}_{self.id.removeprefix('resp_')}{self._items:04x}"

    def base(self, status: str) -> dict[str, Any]:
        request = self.request
        text = request.get("text") or {"format": {"type": "text"}}
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": request.get("instructions"),
            "max_output_tokens": request.get("max_output_tokens"),
            "model": request.get("model"),
            "output": [],
            "parallel_tool_calls": request.get("parallel_tool_calls", True),
            "previous_response_id": request.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "store": request.get("store", True),
            "temperature": request.get("temperature"),
            "text": text,
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools") or [],
            "top_p": request.get("top_p"),
            "truncation": request.get("truncation", "disabled"),
            "usage": None,
            "user": request.get("user"),
            "metadata": request.get("metadata") or {},
        }


def response_object(completion: dict[str, Any], context: ResponseContext) -> dict[str, Any]:
    """The Responses object for a chat completion (its first choice)."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output = []
    if message.get("content"):
        item_id = context.item_id("msg")
        output.append(_message_item(item_id, message["content"], _logprobs(choice)))
    for call in message.get("tool_calls") or []:
        output.append(_call_item(context.item_id("fc"), call))
    return _finished(context, output, choice.get("finish_reason"), completion.get("usage"))


def _finished(
    context: ResponseContext,
    output: list[dict[str, Any]],
    finish_reason: str | None,
    usage: dict[str, Any] | None,
) -> dict[str, Any]:
    incomplete = {"length": "max_output_tokens", "content_filter": "content_filter"}
    reason = incomplete.get(finish_reason or "")
    response = context.base("incomplete" if reason else "completed")
    response["output"] = output
    if reason:
        response["incomplete_details"] = {"reason": reason}
    response["usage"] = _usage(usage)
    return response


def _message_item(
    item_id: str, text: str, logprobs: list[dict] | None = None, status: str = "completed"
) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
    if logprobs:
        part["logprobs"] = logprobs
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [part],
    }


def _call_item(item_id: str, call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call.get("id") or f"call_{item_id.partition('_')[2]}",
        "name": function.get("name") or "",
        "arguments": function.get("arguments") or "",
        "status": status,
    }


def _logprobs(choice: dict[str, Any]) -> list[dict[str, Any]] | None:
    entries = (choice.get("logprobs") or {}).get("content") or []
    return [
        {
            "token": entry.get("token", ""),
            "logprob": entry.get("logprob", 0.0),
            "bytes": entry.get("bytes") or [],
            "top_logprobs": entry.get("top_logprobs") or [],
        }
        for entry in entries
    ] or None


def _usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    usage = usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": prompt + completion,
    }


def assistant_message(response: dict[str, Any]) -> dict[str, Any] | None:
    """A response's output as the chat message a continuation shows the model next time."""
    text, calls = "", []
    for item in response.get("output") or []:
        if item.get("type") == "message":
            text += "".join(p.get("text", "") for p in item.get("content") or [])
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item["call_id"],
                    "type": "function",
                    "function": {"name": item["name"], "arguments": item["arguments"]},
                }
            )
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


# --- streaming -----------------------------------------------------------------------------


class ResponsesStream:
    """Chat-completion chunks in, Responses stream events out, in the API's order:

    response.created, response.in_progress; per output item: output_item.added, then for a
    message content_part.added, output_text.delta..., output_text.done, content_part.done,
    or for a function call function_call_arguments.delta..., function_call_arguments.done;
    output_item.done; finally response.completed (or response.incomplete).

    Only the first choice is streamed (the Responses API has no `n`).
    """

    def __init__(self, context: ResponseContext) -> None:
        self.context = context
        self.sequence = 0
        self.output: list[dict[str, Any]] = []
        self._text: dict[str, Any] | None = None  # the message item being written
        self._calls: dict[int, dict[str, Any]] = {}  # chat tool-call index -> item
        self._open_call: int | None = None
        self._usage: dict[str, Any] | None = None
        self._finish: str | None = None

    def _event(self, kind: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return kind, event

    def start(self) -> Iterator[tuple[str, dict[str, Any]]]:
        yield self._event("response.created", response=self.context.base("in_progress"))
        yield self._event("response.in_progress", response=self.context.base("in_progress"))

    def chunk(self, chunk: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        if chunk.get("usage"):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                yield from self._text_delta(delta["content"], choice)
            for call in delta.get("tool_calls") or []:
                yield from self._call_delta(call)
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]

    def _text_delta(self, text: str, choice: dict[str, Any]) -> Iterator[tuple[str, dict]]:
        yield from self._close_call()
        if self._text is None:
            item = _message_item(self.context.item_id("msg"), "", status="in_progress")
            item["content"] = []
            self._text = item
            self.output.append(item)
            yield self._event(
                "response.output_item.added", output_index=len(self.output) - 1, item=item
            )
            yield self._event(
                "response.content_part.added",
                item_id=item["id"],
                output_index=len(self.output) - 1,
                content_index=0,
                part={"type": "output_text", "text": "", "annotations": []},
            )
            item["content"] = [{"type": "output_text", "text": "", "annotations": []}]
        part = self._text["content"][0]
        part["text"] += text
        yield self._event(
            "response.output_text.delta",
            item_id=self._text["id"],
            output_index=self.output.index(self._text),
            content_index=0,
            delta=text,
            logprobs=_logprobs(choice) or [],
        )

    def _close_text(self) -> Iterator[tuple[str, dict[str, Any]]]:
        item, self._text = self._text, None
        if item is None:
            return
        index, part = self.output.index(item), item["content"][0]
        where = {"item_id": item["id"], "output_index": index, "content_index": 0}
        yield self._event("response.output_text.done", **where, text=part["text"], logprobs=[])
        yield self._event("response.content_part.done", **where, part=part)
        item["status"] = "completed"
        yield self._event("response.output_item.done", output_index=index, item=item)

    def _call_delta(self, call: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        index = call.get("index", 0)
        function = call.get("function") or {}
        item = self._calls.get(index)
        if item is None:
            yield from self._close_text()
            yield from self._close_call()
            item = _call_item(
                self.context.item_id("fc"),
                {"id": call.get("id"), "function": function},
                "in_progress",
            )
            item["arguments"] = ""
            self._calls[index], self._open_call = item, index
            self.output.append(item)
            yield self._event(
                "response.output_item.added", output_index=len(self.output) - 1, item=item
            )
        elif function.get("name"):
            item["name"] += function["name"]
        if function.get("arguments"):
            item["arguments"] += function["arguments"]
            yield self._event(
                "response.function_call_arguments.delta",
                item_id=item["id"],
                output_index=self.output.index(item),
                delta=function["arguments"],
            )

    def _close_call(self) -> Iterator[tuple[str, dict[str, Any]]]:
        if self._open_call is None:
            return
        item = self._calls[self._open_call]
        self._open_call = None
        index = self.output.index(item)
        yield self._event(
            "response.function_call_arguments.done",
            item_id=item["id"],
            output_index=index,
            name=item["name"],
            arguments=item["arguments"],
        )
        item["status"] = "completed"
        yield self._event("response.output_item.done", output_index=index, item=item)

    def finish(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """The closing events; `self.response` is the whole response afterwards."""
        yield from self._close_text()
        yield from self._close_call()
        self.response = _finished(self.context, self.output, self._finish, self._usage)
        kind = "response.incomplete" if self.response["status"] == "incomplete" else None
        yield self._event(kind or "response.completed", response=self.response)

    def fail(self, message: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """The closing events of a stream the upstream broke off."""
        self.response = self.context.base("failed")
        self.response["output"] = self.output
        self.response["error"] = {"code": "server_error", "message": message}
        yield self._event("response.failed", response=self.response)
