"""Spans read as GenAI operations, after OpenTelemetry's GenAI semantic conventions.

A span is a GenAI operation when it names one in `gen_ai.operation.name`: a model call
(`chat`, `text_completion`, `generate_content`), a tool run (`execute_tool`) or an agent run
(`invoke_agent`). Instrumentations older than that attribute are recognised by what they do
carry: a model and messages make a model call, a tool name a tool run. Anything else, other
GenAI operations (embeddings, retrieval) included, is not something a trajectory records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from proxy.otlp.decode import Span
from proxy.otlp.messages import (
    MESSAGE_EVENTS,
    InvalidMessages,
    arguments_text,
    input_messages,
    output_messages,
    parsed_json,
    tool_definitions,
)

__all__ = [
    "EXECUTE_TOOL",
    "INVOKE_AGENT",
    "MODEL_OPERATIONS",
    "InvalidSpan",
    "ModelCall",
    "ToolRun",
    "agent_name",
    "conversation_id",
    "read_span",
]

OPERATION = "gen_ai.operation.name"
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
EXECUTE_TOOL = "execute_tool"
INVOKE_AGENT = "invoke_agent"
_STATUS_ERROR = 2
_YEAR_9000_NANO = 221_845_392_000 * 10**9
# gen_ai.request.* attributes recorded as decoding parameters beyond ATDP's named ones.
_EXTRA_DECODING = ("top_k", "frequency_penalty", "presence_penalty", "stream")


class InvalidSpan(ValueError):
    """A GenAI span whose attributes do not follow the conventions; the message says how."""


@dataclass(frozen=True)
class ModelCall:
    """A model call (or an agent run, `operation` "invoke_agent") as its span recorded it."""

    span: Span
    operation: str
    request_model: str | None
    response_model: str | None
    provider: str | None
    messages: list[dict[str, Any]]  # what the model was sent, system instructions first
    answers: list[dict[str, Any]]  # one assistant message per choice, with `finish_reason`
    tools: list[dict[str, Any]]
    input_tokens: int | None
    output_tokens: int | None
    decoding: dict[str, Any]
    response_id: str | None
    error: tuple[str, str] | None = None  # (error class, message) when the span failed


@dataclass(frozen=True)
class ToolRun:
    """One tool execution: the call the agent ran and what came back."""

    span: Span
    name: str
    call_id: str
    arguments: str
    result: Any = None
    has_result: bool = False
    description: str | None = None
    error: tuple[str, str] | None = field(default=None)


def read_span(span: Span) -> ModelCall | ToolRun | None:
    """The operation a span records, or None when it records none a trajectory keeps.

    Raises:
        InvalidSpan: a GenAI span whose attributes break the conventions.
    """
    operation = _operation(span)
    if operation not in MODEL_OPERATIONS | {INVOKE_AGENT, EXECUTE_TOOL}:
        return None
    _check_identity(span)
    try:
        if operation in MODEL_OPERATIONS or operation == INVOKE_AGENT:
            return _model_call(span, operation)
        if operation == EXECUTE_TOOL:
            return _tool_run(span)
    except InvalidMessages as error:
        raise InvalidSpan(str(error)) from None
    return None


def _check_identity(span: Span) -> None:
    """Ids and times a trajectory can be built on (OTLP marks a missing id with zeros)."""
    if len(span.trace_id) != 32 or not span.trace_id.strip("0"):
        raise InvalidSpan(f"the trace id must be 16 bytes, not all zero: {span.trace_id!r}")
    if len(span.span_id) != 16 or not span.span_id.strip("0"):
        raise InvalidSpan(f"the span id must be 8 bytes, not all zero: {span.span_id!r}")
    if not 0 < span.start_unix_nano < _YEAR_9000_NANO:
        raise InvalidSpan(f"the span's start time is not a time: {span.start_unix_nano}")


def agent_name(span: Span) -> str | None:
    return _string(span, "gen_ai.agent.name")


def conversation_id(span: Span) -> str | None:
    return _string(span, "gen_ai.conversation.id")


def _operation(span: Span) -> str | None:
    named = _string(span, OPERATION)
    if named is not None:
        return named
    attributes = span.attributes
    if any(key in attributes for key in ("gen_ai.request.model", "gen_ai.input.messages")) or any(
        event.name in MESSAGE_EVENTS for event in span.events
    ):
        return "chat"  # instrumentations from before gen_ai.operation.name
    if "gen_ai.tool.name" in attributes:
        return EXECUTE_TOOL
    return None


def _model_call(span: Span, operation: str) -> ModelCall:
    request_model = _string(span, "gen_ai.request.model")
    response_model = _string(span, "gen_ai.response.model")
    messages, answers = input_messages(span), output_messages(span)
    if operation != INVOKE_AGENT and not (request_model or response_model or messages or answers):
        raise InvalidSpan(
            f"a {operation} span needs gen_ai.request.model or its messages; it has neither"
        )
    return ModelCall(
        span=span,
        operation=operation,
        request_model=request_model,
        response_model=response_model,
        provider=_string(span, "gen_ai.provider.name") or _string(span, "gen_ai.system"),
        messages=messages,
        answers=answers,
        tools=tool_definitions(span),
        input_tokens=_count(span, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
        output_tokens=_count(span, "gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"),
        decoding=_decoding(span),
        response_id=_string(span, "gen_ai.response.id"),
        error=_error(span),
    )


def _tool_run(span: Span) -> ToolRun:
    name = _string(span, "gen_ai.tool.name")
    if name is None and span.name.startswith(f"{EXECUTE_TOOL} "):
        name = span.name.removeprefix(f"{EXECUTE_TOOL} ").strip() or None
    if name is None:
        raise InvalidSpan("an execute_tool span needs gen_ai.tool.name")
    attributes = span.attributes
    result = attributes.get("gen_ai.tool.call.result")
    return ToolRun(
        span=span,
        name=name,
        call_id=_string(span, "gen_ai.tool.call.id") or "",
        arguments=arguments_text(attributes.get("gen_ai.tool.call.arguments")),
        result=parsed_json(result),
        has_result="gen_ai.tool.call.result" in attributes,
        description=_string(span, "gen_ai.tool.description"),
        error=_error(span),
    )


def _error(span: Span) -> tuple[str, str] | None:
    if span.status_code != _STATUS_ERROR:
        return None
    kind = span.attributes.get("error.type")
    return (kind if isinstance(kind, str) and kind else "error"), span.status_message


def _string(span: Span, key: str) -> str | None:
    value = span.attributes.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidSpan(f"{key} must be a string, not {value!r:.80}")
    return value or None


def _count(span: Span, key: str, older: str) -> int | None:
    value = span.attributes.get(key, span.attributes.get(older))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidSpan(f"{key} must be a non-negative integer, not {value!r:.80}")
    return value


def _number(span: Span, key: str) -> int | float | None:
    value = span.attributes.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidSpan(f"{key} must be a finite number, not {value!r:.80}")
    return value


def _decoding(span: Span) -> dict[str, Any]:
    """The request's decoding parameters in the shape of `atdp.DecodingParams`."""
    stop = span.attributes.get("gen_ai.request.stop_sequences")
    decoding = {
        "temperature": _number(span, "gen_ai.request.temperature"),
        "top_p": _number(span, "gen_ai.request.top_p"),
        "max_tokens": _number(span, "gen_ai.request.max_tokens"),
        "seed": _number(span, "gen_ai.request.seed")
        if "gen_ai.request.seed" in span.attributes
        else _number(span, "gen_ai.openai.request.seed"),
        "n": _number(span, "gen_ai.request.choice.count"),
        "stop": [stop] if isinstance(stop, str) else stop,
    }
    known = {key: value for key, value in decoding.items() if value is not None}
    known["extra"] = {
        key: span.attributes[f"gen_ai.request.{key}"]
        for key in _EXTRA_DECODING
        if f"gen_ai.request.{key}" in span.attributes
    }
    return known
