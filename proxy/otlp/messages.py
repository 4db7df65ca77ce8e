"""GenAI messages as spans carry them, read into chat-completions messages.

Two conventions are in use. The current one puts the conversation on the span as JSON:
`gen_ai.system_instructions` (a list of parts), `gen_ai.input.messages` and
`gen_ai.output.messages` (lists of `{"role", "parts": [...], "finish_reason"}` whose parts
are `text`, `tool_call`, `tool_call_response`, `blob`, `file_data`, ...). The older one
(semantic conventions up to 1.36) records one span event per message: `gen_ai.system.message`,
`gen_ai.user.message`, `gen_ai.assistant.message`, `gen_ai.tool.message` and `gen_ai.choice`,
whose body instrumentations write as the event's attributes, or as JSON in one attribute.

Either way the result is the chat-completions shape the gateway records
(`{"role", "content", "tool_calls": [{"id", "type", "function": {"name", "arguments"}}],
"tool_call_id"}`), so the events built from it are the ones a served call gives.
"""

from __future__ import annotations

from typing import Any

import orjson

from proxy.otlp.decode import Span, SpanEvent

__all__ = [
    "MESSAGE_EVENTS",
    "InvalidMessages",
    "arguments_text",
    "input_messages",
    "output_messages",
    "parsed_json",
    "tool_definitions",
]

SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_DEFINITIONS = "gen_ai.tool.definitions"
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
MESSAGE_EVENTS = frozenset({*_EVENT_ROLES, CHOICE_EVENT})
# Where instrumentations put an event's body: one JSON attribute, or the fields themselves.
_BODY_ATTRIBUTES = ("gen_ai.event.content", "event.body", "body")


class InvalidMessages(ValueError):
    """A messages attribute or event that does not follow the GenAI conventions."""


def input_messages(span: Span) -> list[dict[str, Any]]:
    """What the model was sent: system instructions first, then the input messages."""
    system = _system_message(span.attributes.get(SYSTEM_INSTRUCTIONS))
    if INPUT_MESSAGES in span.attributes:
        messages = _chat_messages(_json_list(span.attributes[INPUT_MESSAGES], INPUT_MESSAGES))
    else:
        messages = [
            message
            for event in span.events
            if event.name in _EVENT_ROLES
            for message in _event_messages(event)
        ]
    return [system, *messages] if system else messages


def output_messages(span: Span) -> list[dict[str, Any]]:
    """What the model answered, one message per choice, each with its `finish_reason`."""
    if OUTPUT_MESSAGES in span.attributes:
        found = _json_list(span.attributes[OUTPUT_MESSAGES], OUTPUT_MESSAGES)
        return [_output_message(item) for item in found]
    choices = [_choice(event) for event in span.events if event.name == CHOICE_EVENT]
    return [message for _, message in sorted(choices, key=lambda choice: choice[0])]


def tool_definitions(span: Span) -> list[dict[str, Any]]:
    """The tools offered to the model, as chat-completions function tools."""
    if TOOL_DEFINITIONS not in span.attributes:
        return []
    tools = []
    for item in _json_list(span.attributes[TOOL_DEFINITIONS], TOOL_DEFINITIONS):
        function = item.get("function") if isinstance(item.get("function"), dict) else item
        if not isinstance(function.get("name"), str):
            raise InvalidMessages(f"{TOOL_DEFINITIONS}: a tool without a name: {_show(item)}")
        tools.append({"type": "function", "function": function})
    return tools


def _json_list(value: Any, name: str) -> list[dict[str, Any]]:
    """A JSON-array attribute (a string on spans from SDKs without structured attributes)."""
    if isinstance(value, str):
        try:
            value = orjson.loads(value)
        except orjson.JSONDecodeError as error:
            raise InvalidMessages(f"{name} is not valid JSON: {error}") from None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InvalidMessages(f"{name} must be a JSON array of objects, not {_show(value)}")
    return value


def _show(value: Any) -> str:
    return repr(value)[:120]


def _system_message(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, str) and not value.lstrip().startswith("["):
        return {"role": "system", "content": value}  # some instrumentations write plain text
    parts = _json_list(value, SYSTEM_INSTRUCTIONS)
    content, _, _ = _read_parts(parts, SYSTEM_INSTRUCTIONS)
    return {"role": "system", "content": content}


def _chat_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OTel messages as chat messages; a tool message's responses become one message each."""
    messages = []
    for item in items:
        role, parts = item.get("role"), item.get("parts")
        if not isinstance(role, str) or not isinstance(parts, list):
            raise InvalidMessages(f"a message needs a `role` and a `parts` list: {_show(item)}")
        content, calls, responses = _read_parts(parts, f"a {role} message")
        if responses:
            messages += [{"role": "tool", "tool_call_id": i, "content": r} for i, r in responses]
            if content is None and not calls:
                continue
        message: dict[str, Any] = {"role": role, "content": content}
        if calls:
            message["tool_calls"] = calls
        if isinstance(item.get("name"), str):
            message["name"] = item["name"]
        messages.append(message)
    return messages


def _output_message(item: dict[str, Any]) -> dict[str, Any]:
    messages = _chat_messages([{**item, "role": item.get("role") or "assistant"}])
    message = messages[-1] if messages else {"role": "assistant", "content": None}
    finish = item.get("finish_reason")
    return {**message, "finish_reason": finish if isinstance(finish, str) else None}


def _read_parts(
    parts: list[Any], where: str
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]], list[tuple[str, str]]]:
    """(content, tool calls, tool responses as (call id, text)) of a message's parts.

    Content is the text parts joined, or, when the message also holds other parts (images,
    files, reasoning), the list of them all as content parts."""
    texts: list[str] = []
    others: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    responses: list[tuple[str, str]] = []
    for part in parts:
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise InvalidMessages(f"{where}: a part without a `type`: {_show(part)}")
        if kind == "text":
            texts.append(_text(part.get("content")))
        elif kind == "tool_call":
            calls.append(_tool_call(part, where))
        elif kind == "tool_call_response":
            response = part.get("response", part.get("result"))
            responses.append((_call_id(part.get("id")), _text(response)))
        else:
            others.append(part)
    if not others:
        return ("\n".join(texts) if texts else None), calls, responses
    content = [{"type": "text", "text": text} for text in texts] + others
    return content, calls, responses


def _tool_call(part: dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(part.get("name"), str):
        raise InvalidMessages(f"{where}: a tool_call part without a `name`: {_show(part)}")
    return {
        "id": _call_id(part.get("id")),
        "type": "function",
        "function": {"name": part["name"], "arguments": arguments_text(part.get("arguments"))},
    }


def _call_id(value: Any) -> str:
    return value.strip() if isinstance(value, str) else ""


def _text(value: Any) -> str:
    """A part's content as text: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    return "" if value is None else orjson.dumps(value).decode()


def parsed_json(value: Any) -> Any:
    """Text that holds JSON, parsed; anything else as it is (tool output is recorded so)."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value


def arguments_text(value: Any) -> str:
    """Tool-call arguments as the text a model emits (structured ones as JSON)."""
    return _text(value)


def _event_body(event: SpanEvent) -> dict[str, Any]:
    """An old-convention event's body: from its JSON attribute, else its attributes."""
    for name in _BODY_ATTRIBUTES:
        value = event.attributes.get(name)
        if isinstance(value, str):
            try:
                value = orjson.loads(value)
            except orjson.JSONDecodeError:
                raise InvalidMessages(f"{event.name}: `{name}` is not valid JSON") from None
        if isinstance(value, dict):
            return value
    return {key: _maybe_json(key, value) for key, value in event.attributes.items()}


def _maybe_json(key: str, value: Any) -> Any:
    """Structured body fields flattened to JSON text by SDKs that cannot hold them."""
    if key in {"tool_calls", "message"} and isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _event_messages(event: SpanEvent) -> list[dict[str, Any]]:
    body = _event_body(event)
    role = _EVENT_ROLES[event.name]
    content = body.get("content")
    if role == "tool":
        call_id = body.get("id", body.get("tool_call_id"))
        return [{"role": "tool", "tool_call_id": _call_id(call_id), "content": _text(content)}]
    message: dict[str, Any] = {"role": role, "content": _event_content(content)}
    calls = _old_tool_calls(body.get("tool_calls"), event.name)
    if calls:
        message["tool_calls"] = calls
    return [message]


def _event_content(content: Any) -> str | list[dict[str, Any]] | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(part, dict) for part in content):
        return content  # content parts, as chat completions writes them
    return _text(content)


def _old_tool_calls(value: Any, where: str) -> list[dict[str, Any]]:
    """`tool_calls` as the old events write them: chat-completions tool calls."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidMessages(f"{where}: `tool_calls` must be a list, not {_show(value)}")
    calls = []
    for call in value:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidMessages(f"{where}: a tool call without a function name: {_show(call)}")
        calls.append(
            {
                "id": _call_id(call.get("id")),
                "type": "function",
                "function": {
                    "name": function["name"],
                    "arguments": arguments_text(function.get("arguments")),
                },
            }
        )
    return calls


def _choice(event: SpanEvent) -> tuple[int, dict[str, Any]]:
    """A `gen_ai.choice` event: (its index, the message with its finish reason)."""
    body = _event_body(event)
    message = body.get("message") if isinstance(body.get("message"), dict) else {}
    index = body.get("index", 0)
    content = message.get("content", body.get("content"))
    answer: dict[str, Any] = {
        "role": "assistant",
        "content": _event_content(content),
        "finish_reason": body.get("finish_reason")
        if isinstance(body.get("finish_reason"), str)
        else None,
    }
    calls = _old_tool_calls(message.get("tool_calls", body.get("tool_calls")), event.name)
    if calls:
        answer["tool_calls"] = calls
    return (index if isinstance(index, int) else 0), answer
