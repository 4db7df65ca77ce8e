"""Answers as the model writes them: content, then `<tool_call>{json}</tool_call>` calls."""

from __future__ import annotations

import json
from typing import Any

from atdp.tool_text import TOOL_CALL_CLOSE, TOOL_CALL_OPEN

__all__ = ["call_text", "completion_text"]


def call_text(name: str, arguments: Any) -> str:
    """One tool call as the model writes it (arguments a JSON object or its text)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments or "{}")
        except ValueError:
            pass  # kept as the model wrote it: a broken call stays broken
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}{body}{TOOL_CALL_CLOSE}"


def completion_text(completion: dict[str, Any]) -> str:
    """A recorded completion (`{"content", "tool_calls": [{"name", "arguments"}]}`, as a
    training export holds it) as the text the model wrote."""
    calls = completion.get("tool_calls") or []
    return (completion.get("content") or "") + "".join(
        call_text(call["name"], call.get("arguments")) for call in calls
    )
