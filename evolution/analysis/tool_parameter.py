"""The argument a tool's error names ("order_id: must be a string": order_id)."""

from __future__ import annotations

import json
import re

from evolution.analysis.tool_errors import (
    ARGUMENT_ERRORS,
    ROUTING_ERRORS,
    error_class_name,
    error_text,
)
from registry import ToolCallRecord

__all__ = ["tool_parameter"]

_PARAMETER_KEYS = ("parameter", "param", "argument", "field", "property", "loc", "path")
_NESTED_KEYS = ("error", "errors", "detail", "details")
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_.\[\]]*"
_NAMED_PARAMETER = re.compile(
    rf"\b(?:parameter|argument|field|param|property)s?\s+[`'\"]?({_IDENTIFIER})", re.IGNORECASE
)
# "'order_id' is required" names a parameter; "'coach' is not one of [...]" (jsonschema's
# wording) quotes the refused value.
_QUOTED_PARAMETER = re.compile(
    rf"[`'\"]({_IDENTIFIER})[`'\"]\s+(?:is|must|should|was|has)\b(?!\s+not\b)"
)
# "order_id: must be a string"; capitalised heads ("Error:", "Note:") are not parameters.
_PREFIXED_PARAMETER = re.compile(r"^\s*([a-z_][A-Za-z0-9_.\[\]]*)\s*:")
_KNOWN_ERRORS = ARGUMENT_ERRORS | ROUTING_ERRORS
_NOT_PARAMETERS = frozenset(
    {"error", "exception", "traceback", "warning", "invalid", "failed", "failure", "value"}
)


def tool_parameter(call: ToolCallRecord) -> str | None:
    """The argument a tool's error names, if it names one.

    Structured returns first ({"parameter": "order_id"}, {"loc": ["body", "order_id"]}),
    then the error text ("order_id: must be a string", "missing parameter 'order_id'"),
    then any argument of the call that the text mentions.
    """
    for source in (call.tool_return, _json_or_none(call.error_message)):
        found = _structured_parameter(source)
        if found:
            return found
    text = error_text(call) or ""
    for line in [*_error_strings(call.tool_return), text]:  # the message before its wrapper
        found = _text_parameter(line)
        if found:
            return found
    return _mentioned_argument(call.arguments, text)


def _json_or_none(text: str | None) -> object:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _structured_parameter(value: object, depth: int = 0) -> str | None:
    if depth > 3:
        return None
    if isinstance(value, list):
        return next((p for item in value if (p := _structured_parameter(item, depth + 1))), None)
    if not isinstance(value, dict):
        return None
    for key in _PARAMETER_KEYS:
        found = _parameter_name(value.get(key))
        if found:
            return found
    for key in _NESTED_KEYS:
        found = _structured_parameter(value.get(key), depth + 1)
        if found:
            return found
    return None


def _parameter_name(value: object) -> str | None:
    """A parameter named by a string or a location path (["body", "order_id", 0])."""
    if isinstance(value, list):
        names = [item for item in value if isinstance(item, str)]
        value = names[-1] if names else None
    if isinstance(value, str) and re.fullmatch(_IDENTIFIER, value.strip()):
        return _acceptable(value.strip())
    return None


def _error_strings(value: object) -> list[str]:
    """Error strings inside a structured return ({"error": "order_id: bad"})."""
    if not isinstance(value, dict):
        return []
    return [
        item
        for key in ("error", "message", "detail", "msg")
        if isinstance(item := value.get(key), str)
    ]


def _text_parameter(text: str) -> str | None:
    for pattern in (_PREFIXED_PARAMETER, _NAMED_PARAMETER, _QUOTED_PARAMETER):
        for match in pattern.finditer(text):
            found = _acceptable(match.group(1))
            if found:
                return found
    return None


def _acceptable(name: str) -> str | None:
    """Error words and class names are not parameters ("Error: ...", "ValidationError: ...")."""
    lowered = name.lower()
    if lowered in _NOT_PARAMETERS or "error" in lowered or "exception" in lowered:
        return None
    if error_class_name(name) in _KNOWN_ERRORS:
        return None
    return name


def _mentioned_argument(arguments: str, text: str) -> str | None:
    parsed = _json_or_none(arguments)
    if not isinstance(parsed, dict) or not text:
        return None
    mentioned = [
        (match.start(), key)
        for key in parsed
        if isinstance(key, str) and (match := re.search(rf"\b{re.escape(key)}\b", text))
    ]
    return min(mentioned)[1] if mentioned else None
