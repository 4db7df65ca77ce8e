"""What every protocol's route does around the pipeline: read and admit the request, then
serve it whole or stream it in the protocol's own events.

A route translates its protocol's request into a chat-completions body, admits it
(`admit`: the agent, its grant, the rate limit, the training and evaluation headers),
and hands it to `Gateway.serve` or to `stream` with a `StreamEncoder` that turns each
chat-completion chunk, as the agent may see it (overlays undone), into the protocol's
server-sent events.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Protocol

from fastapi import Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError

from atdp import Traffic
from proxy import jsonio
from proxy.admission import Admitted
from proxy.engines.base import UpstreamError, UpstreamTimeout
from proxy.errors import GatewayError
from proxy.governance import parse_training_header
from proxy.schemas import ChatCompletionRequest, describe_validation_error
from proxy.service import GatewayService, Served, new_session_id
from proxy.streaming import ChatStream
from registry import ApiKeyIdentity

__all__ = [
    "EventStreamEncoder",
    "StreamEncoder",
    "StreamTranslator",
    "admit",
    "header_dict",
    "read_json",
    "response_headers",
    "stream",
    "validated_chat",
]


def header_dict(request: Request) -> dict[str, str]:
    """The request's headers as a plain dict (lower-case names; the first of repeated
    ones), for the hot path's many look-ups."""
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in reversed(request.scope["headers"])
    }


async def read_json(request: Request, limit: int) -> Any:
    """The body as JSON; 413 past `limit` bytes (before and while reading), 400 if malformed."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise GatewayError(
            413, f"Request body is larger than the {limit}-byte limit.", code="body_too_large"
        )
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise GatewayError(
                413, f"Request body is larger than the {limit}-byte limit.", code="body_too_large"
            )
        chunks.append(chunk)
    try:
        return jsonio.loads(b"".join(chunks))
    except jsonio.JSONDecodeError as error:
        raise GatewayError(
            400, f"The body is not valid JSON: {error}", code="invalid_json"
        ) from None


def validated_chat(body: Any) -> ChatCompletionRequest:
    """A chat-completions body checked as the gateway checks every request (400 if not)."""
    if not isinstance(body, dict):
        raise GatewayError(400, "The body must be a JSON object.", code="invalid_request")
    try:
        return ChatCompletionRequest.model_validate(body)
    except ValidationError as error:
        message, param = describe_validation_error(error)
        raise GatewayError(400, message, param=param, code="invalid_value") from None


def response_headers(served: Served, started: float) -> dict[str, str]:
    """The served call's ids, and where its time went (`Server-Timing`): `upstream`, from
    sending the upstream call to handling its answer, and `gateway`, the rest of the time
    since the handler began at `started` (a `time.perf_counter()`), up to now: the
    gateway's own work and its waits for the event loop. Time spent before the handler (the
    request's arrival) or after (writing the answer) is in neither."""
    total_ms = (time.perf_counter() - started) * 1000
    gateway_ms = max(total_ms - served.upstream_ms, 0.0)
    return {
        "X-Evoplane-Session-Id": served.session,
        "X-Evoplane-Trajectory-Id": str(served.trajectory_id),
        "X-Evoplane-Event-Id": str(served.event_id),
        "X-Evoplane-Version": served.version_id,
        "Server-Timing": f"upstream;dur={served.upstream_ms:.3f}, gateway;dur={gateway_ms:.3f}",
    }


async def admit(
    service: GatewayService,
    identity: ApiKeyIdentity,
    headers: dict[str, str],
    agent: str,
    session: str | None,
    gone: Callable[[], Awaitable[bool]] | None = None,
) -> Admitted:
    """Check that the key may use `agent` now (404/403/429 otherwise) and read the
    request's training and evaluation headers, whether an SDK retries it and the tenant's
    policy; no session given starts a new one. `gone`: whether the client has disconnected."""
    await service.access.authorize(identity, agent)
    service.rate_limit.check(identity.tenant)
    try:
        opt_out = parse_training_header(headers.get("x-evoplane-training"))
    except ValueError as error:
        raise GatewayError(
            400, str(error), param="X-Evoplane-Training", code="invalid_header"
        ) from None
    traffic, pin, harness = _evaluation(headers)
    minted = not session
    session = new_session_id() if minted else str(session)[:200]
    retry = _retry_count(headers.get("x-stainless-retry-count"))
    policy = await service.catalog.policy(identity.tenant)
    return Admitted(
        identity, agent, session, opt_out, policy, traffic, pin, harness, minted, retry, gone
    )


def _retry_count(header: str | None) -> int:
    """The SDK's number for an automatic retry (0 for a first attempt; nonsense reads 0)."""
    try:
        return max(0, int(header or 0))
    except ValueError:
        return 0


def _evaluation(headers: dict[str, str]) -> tuple[Traffic, str | None, bool]:
    """`X-Evoplane-Traffic: evaluation` marks replay and optimiser calls (never training
    data, never user traffic); only such calls may pin a version with `X-Evoplane-Version`,
    or leave out its harness with `X-Evoplane-Harness: off` (a harness optimiser brings its
    own instructions and demos).

    Returns (traffic, pinned version, whether to apply the version's harness)."""
    value = (headers.get("x-evoplane-traffic") or "user").strip().lower()
    if value not in {"user", "evaluation"}:
        raise GatewayError(
            400,
            f"X-Evoplane-Traffic must be 'user' or 'evaluation', not {value!r}.",
            param="X-Evoplane-Traffic",
            code="invalid_header",
        )
    traffic = Traffic(value)
    pin = headers.get("x-evoplane-version")
    harness = (headers.get("x-evoplane-harness") or "on").strip().lower()
    if harness not in {"on", "off"}:
        raise GatewayError(
            400,
            f"X-Evoplane-Harness must be 'on' or 'off', not {harness!r}.",
            param="X-Evoplane-Harness",
            code="invalid_header",
        )
    for header, given in (
        ("X-Evoplane-Version", bool(pin)),
        ("X-Evoplane-Harness", harness == "off"),
    ):
        if given and traffic is not Traffic.EVALUATION:
            raise GatewayError(
                400,
                f"{header} is for evaluation traffic only; "
                "also send `X-Evoplane-Traffic: evaluation`.",
                param=header,
                code="invalid_header",
            )
    return traffic, pin or None, harness == "on"


class StreamEncoder(Protocol):
    """Turns a chat-completion stream into a protocol's server-sent events."""

    def start(self) -> Iterable[bytes]:
        """What the stream opens with, before the first chunk."""

    def chunk(self, chunk: dict[str, Any]) -> Iterable[bytes]:
        """The events for one chunk, as the agent may see it."""

    def failure(self, message: str) -> Iterable[bytes]:
        """The events that end a stream the upstream broke off."""

    async def end(self, served: Served, answer: dict[str, Any]) -> Iterable[bytes]:
        """The closing events, once the whole answer (`answer`, as the agent sees it) is
        captured; not called after `failure`."""


class StreamTranslator(Protocol):
    """A protocol's stream events, as (event name, data), for a chat-completion stream."""

    def start(self) -> Iterable[tuple[str, dict[str, Any]]]: ...

    def chunk(self, chunk: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]: ...

    def fail(self, message: str) -> Iterable[tuple[str, dict[str, Any]]]: ...

    def finish(self) -> Iterable[tuple[str, dict[str, Any]]]: ...


class EventStreamEncoder:
    """A `StreamTranslator`'s events as named server-sent events (the Responses and
    Messages APIs' streams); `on_end`, when given, runs once the answer is captured."""

    def __init__(
        self,
        translator: StreamTranslator,
        on_end: Callable[[Served], Awaitable[None]] | None = None,
    ) -> None:
        self.translator, self.on_end = translator, on_end

    def start(self) -> Iterable[bytes]:
        return [sse(kind, event) for kind, event in self.translator.start()]

    def chunk(self, chunk: dict[str, Any]) -> Iterable[bytes]:
        return [sse(kind, event) for kind, event in self.translator.chunk(chunk)]

    def failure(self, message: str) -> Iterable[bytes]:
        return [sse(kind, event) for kind, event in self.translator.fail(message)]

    async def end(self, served: Served, answer: dict[str, Any]) -> Iterable[bytes]:
        lines = [sse(kind, event) for kind, event in self.translator.finish()]
        if self.on_end is not None:
            await self.on_end(served)
        return lines


async def stream(
    service: GatewayService,
    admitted: Admitted,
    body: dict[str, Any],
    encoder: StreamEncoder,
    protocol: tuple[str, dict[str, Any]] | None = None,
    stored_response: dict[str, Any] | None = None,
) -> StreamingResponse:
    """A streamed answer to the chat-completions `body` (see `Gateway.stream`), in
    `encoder`'s events, captured whole once it ends (or breaks off)."""
    streamed = await service.stream(
        admitted, body, protocol=protocol, stored_response=stored_response
    )
    headers = {
        "X-Evoplane-Session-Id": admitted.session,
        "X-Evoplane-Version": streamed.route.version.id,
    }
    if streamed.trajectory_id is not None:
        headers["X-Evoplane-Trajectory-Id"] = str(streamed.trajectory_id)
    events = _events(service, streamed, encoder)
    return StreamingResponse(events, media_type="text/event-stream", headers=headers)


async def _events(
    service: GatewayService, streamed: ChatStream, encoder: StreamEncoder
) -> AsyncIterator[bytes]:
    """The stream's chunks as `encoder`'s events; the stream is captured even when the
    client leaves before its end."""
    failure: str | None = None
    try:
        for line in encoder.start():
            yield line
        async for chunk in streamed:
            for line in encoder.chunk(chunk):
                yield line
    except (UpstreamError, UpstreamTimeout) as error:
        failure = str(error) or type(error).__name__
        for line in encoder.failure(failure):
            yield line
    finally:
        served = await service.finish_stream(streamed, failed=failure is not None)
    if failure is None:
        for line in await encoder.end(served, streamed.answer()):
            yield line


def sse(kind: str | None, data: dict[str, Any]) -> bytes:
    """One server-sent event: `event: kind` (when named) and its JSON data."""
    head = b"event: " + kind.encode() + b"\n" if kind else b""
    return head + b"data: " + jsonio.dumps(data) + b"\n\n"
