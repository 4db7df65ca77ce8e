"""Streaming: pass chunks through as they come, and rebuild the full completion for capture.

When a version renames tool arguments or blocks tools, tool-call deltas cannot be mapped
piece by piece (a key name may be split across chunks), so they are held back and sent,
mapped, in one chunk at the end of the stream; text deltas still flow immediately.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import AsyncGenerator
from typing import Any

from proxy.admission import Admitted
from proxy.router import Route
from runtime.version.overlays import Overlaid, restore_response

__all__ = ["ChatStream", "StreamRestorer", "assemble_chunks"]


def assemble_chunks(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The chat.completion equivalent of a list of chat.completion.chunk objects."""
    choices: dict[int, dict[str, Any]] = {}
    completion: dict[str, Any] = {"object": "chat.completion", "choices": []}
    for chunk in chunks:
        for key in ("id", "model", "created", "system_fingerprint"):
            if chunk.get(key) is not None:
                completion[key] = chunk[key]
        if chunk.get("usage"):
            completion["usage"] = chunk["usage"]
        for part in chunk.get("choices") or []:
            _merge(
                choices.setdefault(part.get("index", 0), _empty_choice(part.get("index", 0))), part
            )
    for choice in choices.values():
        calls = choice["message"].pop("_calls")
        if calls:
            choice["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
        if not choice["token_ids"]:
            del choice["token_ids"]
        if not choice["logprobs"]["content"]:
            choice["logprobs"] = None
    completion["choices"] = [choices[i] for i in sorted(choices)]
    return completion


def _empty_choice(index: int) -> dict[str, Any]:
    return {
        "index": index,
        "message": {"role": "assistant", "content": None, "_calls": {}},
        "finish_reason": None,
        "logprobs": {"content": []},
        "token_ids": [],
    }


def _merge(choice: dict[str, Any], part: dict[str, Any]) -> None:
    delta = part.get("delta") or {}
    message = choice["message"]
    if delta.get("content"):
        message["content"] = (message["content"] or "") + delta["content"]
    for call in delta.get("tool_calls") or []:
        held = message["_calls"].setdefault(
            call.get("index", 0),
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        held["id"] = call.get("id") or held["id"]
        function = call.get("function") or {}
        held["function"]["name"] += function.get("name") or ""
        held["function"]["arguments"] += function.get("arguments") or ""
    if part.get("finish_reason"):
        choice["finish_reason"] = part["finish_reason"]
    logprobs = (part.get("logprobs") or {}).get("content")
    if logprobs:
        choice["logprobs"]["content"].extend(logprobs)
    choice["token_ids"].extend(part.get("token_ids") or [])


class StreamRestorer:
    """Maps chunks to the agent's view; holds tool calls back when they must be rewritten."""

    def __init__(self, overlaid: Overlaid) -> None:
        self.overlaid = overlaid
        self.hold_calls = bool(overlaid.argument_maps or overlaid.blocked_tools)
        self._held: list[dict[str, Any]] = []

    def chunk(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        """The chunk to send now, or None when everything in it is held back."""
        if not self.hold_calls:
            return chunk
        has_calls = any(
            (c.get("delta") or {}).get("tool_calls") for c in chunk.get("choices") or []
        )
        finishing = any(c.get("finish_reason") for c in chunk.get("choices") or [])
        if not has_calls and not finishing:
            return chunk
        self._held.append(chunk)
        if not finishing:
            visible = copy.deepcopy(chunk)
            for choice in visible.get("choices") or []:
                (choice.get("delta") or {}).pop("tool_calls", None)
            has_text = any(
                (c.get("delta") or {}).get("content") for c in visible.get("choices") or []
            )
            return visible if has_text else None
        return self._release(chunk)

    def _release(self, last: dict[str, Any]) -> dict[str, Any]:
        """One chunk with the held tool calls, mapped back, and the finish reason."""
        restored = restore_response(assemble_chunks(self._held), self.overlaid)
        self._held = []
        out = {k: v for k, v in last.items() if k != "choices"}
        out["choices"] = []
        for choice in restored["choices"]:
            delta: dict[str, Any] = {}
            calls = (choice.get("message") or {}).get("tool_calls")
            if calls:
                delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(calls)]
            out["choices"].append(
                {"index": choice["index"], "delta": delta, "finish_reason": choice["finish_reason"]}
            )
        return out


class ChatStream:
    """An upstream's chat-completion stream being served: its chunks as the agent may see
    them, and what it answered, for capture.

    Iterating gives the chunks to send, held-back ones skipped; an upstream failure is
    raised from it (`UpstreamError`, `UpstreamTimeout`). `GatewayService.stream` opens one
    with its first chunk read and `GatewayService.finish_stream` captures it.
    """

    def __init__(
        self,
        admitted: Admitted,
        body: dict[str, Any],
        protocol: tuple[str, dict[str, Any]] | None,
        route: Route,
        overlaid: Overlaid,
        started: float,
        upstream: AsyncGenerator[dict],
        first: dict | None,
        trajectory_id: uuid.UUID | None,
        stored_response: dict[str, Any] | None = None,
    ) -> None:
        self.admitted, self.body, self.protocol = admitted, body, protocol
        self.stored_response = stored_response
        self.ended = False  # the upstream's last chunk was read
        # The session's trajectory as the stream opens, if it has one yet (a header's hint).
        self.trajectory_id = trajectory_id
        self.route, self.overlaid, self.started = route, overlaid, started
        self.upstream, self._first = upstream, first
        self.restorer = StreamRestorer(overlaid)
        self.seen: list[dict] = []  # as the upstream sent them
        self.shown: list[dict] = []  # as the agent saw them

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        while True:
            chunk = self._first
            if chunk is None:
                try:
                    chunk = await anext(self.upstream)
                except StopAsyncIteration:
                    self.ended = True
                    raise
            self._first = None
            self.seen.append(chunk)
            visible = self.restorer.chunk(chunk)
            if visible is not None:
                self.shown.append(visible)
                return visible

    def response(self, failed: bool) -> dict[str, Any]:
        """The whole completion as the upstream sent it (choices it broke off in end in
        "error" when it `failed`)."""
        response = assemble_chunks(self.seen)
        if failed:
            for choice in response["choices"]:
                choice["finish_reason"] = choice["finish_reason"] or "error"
        return response

    def answer(self) -> dict[str, Any]:
        """The whole completion as the agent saw it."""
        return assemble_chunks(self.shown)
