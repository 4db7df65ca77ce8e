"""The interface every upstream engine implements, and the errors the gateway maps to HTTP."""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncGenerator
from typing import Any

__all__ = ["UpstreamEngine", "UpstreamError", "UpstreamTimeout"]


class UpstreamError(Exception):
    """The upstream answered with an HTTP error, a malformed response, or closed the connection.

    Args:
        status: the upstream's HTTP status, or None when no status arrived (connection lost).
        message: what went wrong, with the upstream's own error message when it sent one.
        body: the upstream's error body (parsed JSON when it was JSON, else text), if any.
    """

    def __init__(
        self, status: int | None, message: str, body: Any = None, *, retry_after: str | None = None
    ) -> None:
        super().__init__(message if status is None else f"upstream returned {status}: {message}")
        self.status = status
        self.message = message
        self.body = body
        self.retry_after = retry_after  # the upstream's Retry-After header, if it sent one


class UpstreamTimeout(Exception):
    """The upstream did not answer within the request's timeout."""


class UpstreamEngine(abc.ABC):
    """An OpenAI chat-completions upstream: a hosted API, vLLM, SGLang or a local model.

    `model`, when given, replaces `body["model"]`: the gateway serves agents by name and
    sends the version's real model name upstream. Responses are returned as the upstream sent
    them, so token ids and logprobs reach the capture writer untouched.
    """

    @abc.abstractmethod
    async def complete(
        self, body: dict, *, model: str | None, timeout: float, sent: asyncio.Event | None = None
    ) -> dict:
        """One non-streaming chat completion.

        `sent`, when given, is set once the request has left, so the caller can do its own
        work (the gateway builds capture records) while the upstream computes.

        Returns:
            The upstream's `chat.completion` JSON object.

        Raises:
            UpstreamError: the upstream answered 4xx/5xx, garbage, or dropped the connection.
            UpstreamTimeout: no complete answer within `timeout` seconds.
        """

    @abc.abstractmethod
    def stream(self, body: dict, *, model: str | None, timeout: float) -> AsyncGenerator[dict]:
        """A streaming chat completion: yields each `chat.completion.chunk`, ends at [DONE].

        `timeout` bounds the wait for the response and for each next chunk, not the whole
        stream, so a long generation runs on while a stalled upstream is cut off.
        """

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Close pooled connections; the engine is unusable afterwards."""
