"""What a failed tool call says went wrong: its error class and the kind of failure."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from evolution.window import FailureKind
from registry import ToolCallRecord

__all__ = [
    "ARGUMENT_ERRORS",
    "ROUTING_ERRORS",
    "distinct_tool_calls",
    "error_class_name",
    "error_text",
    "tool_failed",
    "tool_failure_kind",
]

# Error classes that say the tool refused the arguments it was given (shape, type, value,
# a missing field): the model called the right tool wrongly, which a clearer tool schema or
# harness can fix. Runtime failures (timeouts, outages, not-found records) are not here.
ARGUMENT_ERRORS = frozenset(
    {
        "bad_format",
        "format_error",
        "invalid_argument",
        "invalid_arguments",
        "invalid_input",
        "invalid_parameter",
        "invalid_params",
        "json_decode_error",
        "missing_argument",
        "missing_field",
        "missing_parameter",
        "schema_error",
        "type_error",
        "validation_error",
        "value_error",
    }
)
# Error classes that say the call should not have gone to this tool at all.
ROUTING_ERRORS = frozenset(
    {
        "blocked_tool",
        "forbidden_tool",
        "invalid_tool",
        "no_such_tool",
        "tool_blocked",
        "tool_not_allowed",
        "tool_not_found",
        "unknown_tool",
        "unsupported_tool",
        "wrong_tool",
    }
)


def tool_failed(call: ToolCallRecord) -> bool:
    return call.success is False or call.error_class is not None


# Call ids that name no call: agents that report a call without its id.
_ANONYMOUS_CALLS = frozenset({"", "agent-reported", "unknown"})


def distinct_tool_calls(records: Iterable[ToolCallRecord]) -> list[ToolCallRecord]:
    """One record per tool call, in the order first seen.

    The gateway records a tool result the agent sends back, and the agent may report the
    same call through /v1/events; with the same call id in one trajectory they are one
    call, and the record with more evidence stands for it: one that says it failed, then
    one with an error message. A call without an id is its own record.
    """
    kept: dict[tuple, ToolCallRecord] = {}
    for record in records:
        key: tuple = (
            (record.event_id,)
            if record.call_id in _ANONYMOUS_CALLS
            else (record.trajectory_id, record.call_id)
        )
        held = kept.get(key)
        if held is None or _evidence(record) > _evidence(held):
            kept[key] = record
    return list(kept.values())


def _evidence(call: ToolCallRecord) -> tuple[bool, bool]:
    return tool_failed(call), call.error_message is not None


def error_class_name(error_class: str) -> str:
    """An error class in one spelling: "ValidationError", "validation-error": "validation_error"."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", error_class.strip())
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_") or "error"


# Generic classes (the gateway's "tool_error" for a result that reads like an error) say
# nothing about the cause, so their message decides.
_ARGUMENT_TEXT = re.compile(
    r"\b(invalid|missing|malformed|must (be|look|match|have|contain|start|end)|should be"
    r"|expected|not a valid|validation|does not match|doesn't match|not one of|one of"
    r"|format|pattern|not permitted|extra (inputs?|fields?|arguments?)"
    r"|(field|parameter|argument|property) (is )?required|required (field|parameter|argument)"
    r"|unexpected (argument|keyword|parameter|field)"
    r"|unknown (argument|keyword|parameter|field|property))\b",
    re.IGNORECASE,
)
_ROUTING_TEXT = re.compile(
    r"\b(unknown|no such|unsupported|blocked|forbidden) (tool|function)\b"
    r"|\b(tool|function)\b[^.]{0,40}\b(not found|does not exist|not allowed|is blocked)\b",
    re.IGNORECASE,
)


def tool_failure_kind(error_class: str, text: str | None) -> FailureKind:
    if error_class in ROUTING_ERRORS:
        return FailureKind.TOOL_ROUTING
    if error_class in ARGUMENT_ERRORS:
        return FailureKind.TOOL_ARGUMENT
    if text and _ROUTING_TEXT.search(text):
        return FailureKind.TOOL_ROUTING
    if text and _ARGUMENT_TEXT.search(text):
        return FailureKind.TOOL_ARGUMENT
    # A tool that failed for its own reasons (timeout, outage): evidence of a failed task.
    return FailureKind.TASK


def error_text(call: ToolCallRecord) -> str | None:
    """The failure in words: the error message, else the tool's return as text."""
    if call.error_message:
        return call.error_message
    returned = call.tool_return
    if returned is None:
        return None
    if isinstance(returned, str):
        return returned
    return json.dumps(returned, ensure_ascii=False, sort_keys=True)
