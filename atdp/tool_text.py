"""Tool calls written as text: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.

Qwen-family chat templates (and the tiny model's) have the model write its tool calls in this
form. The local engine turns generated text into OpenAI `tool_calls` with it, and the RL
trainer reads sampled completions with it, so both see the same actions.
"""

from __future__ import annotations

import json
import uuid

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "ToolCallStream",
    "parse_tool_calls",
    "partial_suffix",
]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"


def partial_suffix(text: str, stop: str) -> int:
    """The length of the longest end of `text` that begins `stop`."""
    for size in range(min(len(text), len(stop) - 1), 0, -1):
        if text.endswith(stop[:size]):
            return size
    return 0


class ToolCallStream:
    """Splits generated text into content and `<tool_call>{json}</tool_call>` calls, as it
    arrives: text that may begin a call is held back until the call is complete or not."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> tuple[str, list[dict]]:
        """Content that is final now, and the calls completed by `text`."""
        self._pending += text
        return self._drain(final=False)

    def close(self) -> tuple[str, list[dict]]:
        """The rest: an unfinished call is content after all."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> tuple[str, list[dict]]:
        content: list[str] = []
        calls: list[dict] = []
        while self._pending:
            pending = self._pending
            start = pending.find(TOOL_CALL_OPEN)
            if start < 0:
                keep = 0 if final else partial_suffix(pending, TOOL_CALL_OPEN)
                content.append(pending[: len(pending) - keep])
                self._pending = pending[len(pending) - keep :]
                break
            if start > 0:
                content.append(pending[:start])
                self._pending = pending = pending[start:]
            end = pending.find(TOOL_CALL_CLOSE)
            if end < 0:
                if final:
                    content.append(pending)
                    self._pending = ""
                break
            segment = pending[: end + len(TOOL_CALL_CLOSE)]
            self._pending = pending[len(segment) :]
            call = _tool_call(segment[len(TOOL_CALL_OPEN) : end])
            if call is None:
                content.append(segment)
            else:
                calls.append(call)
        return "".join(content), calls


def parse_tool_calls(text: str) -> tuple[str | None, list[dict]]:
    """The content and OpenAI `tool_calls` of a generated text.

    Unparsable segments stay in the content. With no calls the text is returned unchanged;
    with calls, the content around them is stripped, None when nothing is left.
    """
    splitter = ToolCallStream()
    content, calls = splitter.feed(text)
    rest, more = splitter.close()
    calls += more
    if not calls:
        return text, []
    return (content + rest).strip() or None, calls


def _tool_call(payload: str) -> dict | None:
    """An OpenAI tool call from `{"name": ..., "arguments": {...}}`, None when it is not one."""
    try:
        call = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        return None
    arguments = call.get("arguments", {})
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments, ensure_ascii=False)
    elif not isinstance(arguments, str):
        return None
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": call["name"], "arguments": arguments},
    }
