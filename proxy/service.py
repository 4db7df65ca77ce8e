"""The gateway's request pipeline: route, serve through the serving pipeline, capture, shadow.

`proxy.app`, the protocols (`proxy.protocols`), MCP, OTLP and feedback are handed a
`GatewayService` and serve every request through it; `proxy.gateway.Gateway` builds it
from the process's long-lived parts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from atdp import new_id
from proxy.admission import Admitted
from proxy.auth import AccessControl
from proxy.capture.recorder import Recorder, Served
from proxy.catalog import Catalog
from proxy.config import GatewayConfig
from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout
from proxy.errors import GatewayError
from proxy.pipeline import ServingPipeline, UpstreamCall
from proxy.rate_limit import RateLimit
from proxy.router import Route, Router
from proxy.shadow import Shadows
from proxy.streaming import ChatStream
from registry import NotFoundError
from runtime.version.overlays import Overlaid

__all__ = ["GatewayService", "Served", "new_session_id", "upstream_failure"]


@dataclass(eq=False)
class GatewayService:
    """What the gateway does with each request, over the process's long-lived parts."""

    config: GatewayConfig
    catalog: Catalog
    access: AccessControl
    rate_limit: RateLimit
    router: Router
    pipeline: ServingPipeline
    recorder: Recorder
    shadows: Shadows

    async def serve(
        self,
        admitted: Admitted,
        body: dict,
        *,
        protocol: tuple[str, dict[str, Any]] | None = None,
        stored_response: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], Served]:
        """A non-streaming completion, captured.

        Capture is split around the upstream call: what the request alone determines is built
        and redacted while the upstream works, so only the answer's part adds latency.
        Evaluation traffic (replays, optimisers) may pin a version and is never shadowed.
        `protocol`: the protocol and the agent's own request, when `body` translates one
        (see `proxy.protocols`). `stored_response`: the Responses API response the call
        stores, recorded with its llm_call (see `Exchange`).
        """
        route, call = await self._send(admitted, body)
        try:
            capture = await self.recorder.begin(
                admitted, body, call.overlaid, route.version, protocol, stored_response
            )
        except BaseException:
            call.drop()
            raise
        try:
            response = await call.answer
        except (UpstreamTimeout, UpstreamError, GatewayError) as error:
            failure = upstream_failure(error)
            self.recorder.failed(capture, call.elapsed_ms(), failure.code)
            raise failure from None
        restored = self.pipeline.restore(response, call.overlaid)
        latency_ms = call.elapsed_ms()
        gone = admitted.gone is not None and await admitted.gone()
        served = self.recorder.finish(capture, response, latency_ms, delivered=not gone)
        self.shadows.copy(admitted, body, route)
        return restored, served

    async def stream(
        self,
        admitted: Admitted,
        body: dict,
        *,
        protocol: tuple[str, dict[str, Any]] | None = None,
        stored_response: dict[str, Any] | None = None,
    ) -> ChatStream:
        """A streamed completion, opened: its first chunk is read, so an upstream failure
        before it fails the call, and one after it ends the stream. `finish_stream`
        captures it once it has ended (with `stored_response` if it ran to its end)."""
        route, call = await self._send(admitted, body, stream=True)
        try:
            first = await call.answer
        except StopAsyncIteration:
            first = None
        except (UpstreamTimeout, UpstreamError) as error:
            raise upstream_failure(error) from None
        trajectory_id = self.recorder.trajectory_of(admitted)
        return ChatStream(
            admitted,
            body,
            protocol,
            route,
            call.overlaid,
            call.started,
            call.chunks,
            first,
            trajectory_id,
            stored_response,
        )

    async def finish_stream(self, streamed: ChatStream, failed: bool) -> Served:
        """Capture a stream that has ended (or broke off: `failed`), and shadow it."""
        admitted, route = streamed.admitted, streamed.route
        response = streamed.response(failed)
        latency_ms = (time.perf_counter() - streamed.started) * 1000
        # Only a stream that ran to its end stores its response (the agent saw it whole).
        stored = streamed.stored_response if streamed.ended and not failed else None
        served = await self.recorder.record_exchange(
            admitted,
            streamed.body,
            streamed.overlaid,
            route.version,
            response,
            latency_ms,
            streamed.protocol,
            stored,
        )
        self.shadows.copy(admitted, streamed.body, route)
        return served

    async def _send(
        self, admitted: Admitted, body: dict, *, stream: bool = False
    ) -> tuple[Route, UpstreamCall]:
        """The request's route and its upstream call, sent. A new session's placement is
        settled once the request is on the wire; placed otherwise than proposed (another
        gateway placed it first), the call is dropped and sent again on that route."""
        tenant = admitted.identity.tenant
        while True:
            route = await self.route_for(admitted)
            call = await self.pipeline.send(
                body,
                route.version,
                route.base_url,
                tenant,
                harness=admitted.harness,
                stream=stream,
            )
            try:
                await call.sent.wait()
                if await self.router.settle(route) is route:
                    return route, call
                await call.abandon()
            except BaseException:
                call.drop()
                raise

    async def prepare(self, admitted: Admitted, body: dict) -> tuple[Route, Overlaid]:
        """The route (or the pinned version) and the request with its overlays applied
        (all but the harness when the call leaves it out: an optimiser brings its own)."""
        route = await self.route_for(admitted)
        overlaid = await self.pipeline.overlay(
            body, route.version, admitted.identity.tenant, harness=admitted.harness
        )
        return route, overlaid

    async def route_for(self, admitted: Admitted) -> Route:
        """The version the request's session is routed to, or the one it pins."""
        tenant, agent = admitted.identity.tenant, admitted.agent
        if admitted.pin is not None:
            return await self.pinned(agent, admitted.pin)
        return await self.router.route(tenant, agent, admitted.session, minted=admitted.minted)

    async def pinned(self, agent: str, version_id: str) -> Route:
        """An evaluation request's own choice of version (replay, optimisers): no shadow."""
        try:
            version = await self.catalog.version(version_id)
        except NotFoundError:
            version = None
        if version is None or version.agent != agent:
            raise GatewayError(
                404,
                f"Version {version_id!r} of agent {agent!r} not found.",
                param="X-Evoplane-Version",
                code="version_not_found",
            )
        return Route(version=version, alias=None, replica=0, shadow=None)

    async def complete(self, engine: UpstreamEngine, overlaid: Overlaid) -> dict[str, Any]:
        """An upstream's answer to a request overlaid already, failures as the client's."""
        try:
            return await self.pipeline.complete(engine, overlaid)
        except (UpstreamTimeout, UpstreamError) as error:
            raise upstream_failure(error) from None


def upstream_failure(error: UpstreamError | UpstreamTimeout | GatewayError) -> GatewayError:
    """The client's view of an upstream failure: 504 for a timeout, 429 for the model's own
    rate limit (so the agent's SDK backs off and retries), 502 for anything else; a
    `GatewayError` is one already."""
    if isinstance(error, GatewayError):
        return error
    if isinstance(error, UpstreamTimeout):
        return GatewayError(
            504, "The upstream model did not answer in time.", code="upstream_timeout"
        )
    if error.status == 429:
        headers = {"Retry-After": error.retry_after} if error.retry_after else None
        return GatewayError(
            429,
            f"The upstream model is rate limited: {error.message}",
            code="upstream_rate_limited",
            headers=headers,
        )
    return GatewayError(502, f"The upstream model failed: {error}", code="upstream_error")


def new_session_id() -> str:
    return f"s-{new_id().hex}"
