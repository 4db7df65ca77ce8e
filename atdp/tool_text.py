"""Tool calls written as text: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`.

Qwen-family chat templates (and the tiny model's) have the model write its tool calls in this
form. The local engine turns generated text into OpenAI `tool_calls` with it, and the RL
trainer reads sampled completions with it, so both see the same actions. While they sample,
`ToolCallGuide` keeps the head of a call being written to the tools offered, as the guided
decoding of serving engines does: a model cannot call a tool that does not exist.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = [
    "TOOL_CALL_CLOSE",
    "TOOL_CALL_OPEN",
    "ToolCallGuide",
    "ToolCallStream",
    "offered_tool_names",
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


# --- guided tool calls ----------------------------------------------------------------------------

# The head of a call, up to where its arguments begin: Qwen templates put a newline after the
# tag, the tiny model does not. vLLM's and SGLang's structural tags for Qwen end there too.
_HEAD_OPENINGS = ('{"name": "', '\n{"name": "')
_HEAD_CLOSING = '", "arguments": '


def offered_tool_names(tools: Iterable[dict] | None, tool_choice: object = None) -> list[str]:
    """The names a call may use: the one `tool_choice` names, else every offered function."""
    if isinstance(tool_choice, dict):
        named = (tool_choice.get("function") or {}).get("name")
        if isinstance(named, str) and named:
            return [named]
    names = []
    for tool in tools or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.append(function["name"])
    return names


class ToolCallGuide:
    """Which tokens may come next while the head of a tool call is written.

    The head is `<tool_call>{"name": "<an offered name>", "arguments": ` (a newline may
    follow the tag). Inside it, only tokens that keep it on that form may come next (a token
    may run on past its end); from the arguments on, and outside calls, every token may. A
    head already off the form (written without the guide) is left alone.

    Args:
        names: the offered tool names.
        pieces: the text of each token id of the vocabulary, decoded alone.
    """

    def __init__(self, names: Iterable[str], pieces: Sequence[str]) -> None:
        valid = {n for n in names if n and '"' not in n and "\\" not in n}
        self._heads = sorted(o + n + _HEAD_CLOSING for o in _HEAD_OPENINGS for n in valid)
        self._longest = max(map(len, self._heads), default=0)
        self._by_first: dict[str, list[tuple[int, str]]] = {}
        for token_id, piece in enumerate(pieces):
            if piece:
                self._by_first.setdefault(piece[0], []).append((token_id, piece))
        self._allowed: dict[str, list[int]] = {}  # by the head written so far

    @property
    def active(self) -> bool:
        """Whether any name is offered: with none, nothing is constrained."""
        return bool(self._heads)

    def allowed(self, text: str) -> list[int] | None:
        """The token ids that may follow `text`; None when any may (outside a call's head)."""
        start = text.rfind(TOOL_CALL_OPEN)
        if start < 0:
            return None
        written = text[start + len(TOOL_CALL_OPEN) :]
        if len(written) >= self._longest:
            return None
        if written not in self._allowed:
            rests = [
                h[len(written) :] for h in self._heads if h.startswith(written) and h != written
            ]
            if not rests:  # off the form: the guide never had a say in it
                return None
            self._allowed[written] = self._continuations(rests)
        return self._allowed[written] or None

    def restrict(self, logits: Any, texts: Sequence[str]) -> Any:
        """`logits` (a tensor, one row per text) with the tokens `allowed` forbids at -inf.

        Returns `logits` itself when no row is inside a name, else a restricted copy.
        """
        rows = [(row, ids) for row, text in enumerate(texts) if (ids := self.allowed(text))]
        if not rows:
            return logits
        limited = logits.clone()
        width = limited.shape[-1]
        for row, ids in rows:
            ids = [i for i in ids if i < width]
            kept = limited[row, ids]  # indexing with a list copies
            limited[row] = float("-inf")
            limited[row, ids] = kept
        return limited

    def _continuations(self, rests: list[str]) -> list[int]:
        """The tokens that begin one of `rests`, or run on past the end of one."""
        allowed: set[int] = set()
        for first in {rest[0] for rest in rests}:
            for token_id, piece in self._by_first.get(first, []):
                if any(rest.startswith(piece) or piece.startswith(rest) for rest in rests):
                    allowed.add(token_id)
        return sorted(allowed)
