"""Whether a tool result the agent sends back says the call failed, and how.

Agents pass a tool's answer back to the model as the tool message's content, in whatever
shape the tool's API wrote it. The gateway records it as the call's outcome, so failures
must be recognised in the shapes APIs really use: an `error` field, FastAPI's `{"detail":
[...]}` validation errors (and its bare `{"detail": "..."}`), an `errors` list, `ok` or
`success` false, an error status, or text that starts like an error.
"""

from __future__ import annotations

from typing import Any

__all__ = ["tool_error_class"]

_ERROR_KEYS = ("error", "error_type", "exception")
_ERROR_TEXT = ("error", "exception", "traceback", "invalid", "failed")
_ERROR_STATUSES = frozenset({"error", "failed", "failure", "fail", "invalid", "rejected"})
_STATUS_KEYS = ("status", "status_code", "code", "http_status")


def tool_error_class(returned: Any, name: Any = str) -> str | None:
    """The error class a tool result reports, or None when it reads as a success.

    Args:
        name: turns an error type the result names into the class recorded.
    """
    if isinstance(returned, dict):
        return _dict_error(returned, name)
    if isinstance(returned, str):
        head = returned.strip().lower()[:80]
        if any(head.startswith(marker) for marker in _ERROR_TEXT):
            return "tool_error"
    return None


def _dict_error(returned: dict[str, Any], name: Any) -> str | None:
    for key in _ERROR_KEYS:
        if returned.get(key):
            value = returned.get("error_type") or returned.get("type") or key
            return name(str(value)) if not isinstance(value, dict) else "error"
    if returned.get("errors"):
        return "validation_error"
    detail = returned.get("detail")
    if isinstance(detail, list) and any(isinstance(item, dict) for item in detail):
        return "validation_error"  # FastAPI / pydantic: the request did not validate
    if detail and set(returned) == {"detail"}:
        return "tool_error"  # FastAPI's HTTPException body
    if returned.get("ok") is False or returned.get("success") is False:
        return "tool_error"
    return _status_error(returned)


def _status_error(returned: dict[str, Any]) -> str | None:
    for key in _STATUS_KEYS:
        status = returned.get(key)
        if isinstance(status, str) and status.strip().lower() in _ERROR_STATUSES:
            return "tool_error"
        if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
            return f"http_{status}"
    return None
