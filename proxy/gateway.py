"""The gateway's request pipeline: identify, route, overlay, call upstream, capture.

`proxy.app` maps HTTP onto these methods; everything here is plain async Python so the
replay engine and tests can drive the same pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import replace
from datetime import timedelta
from typing import Any

from atdp import (
    OutcomeStatus,
    Traffic,
    TrajectoryOutcome,
    new_id,
    utcnow,
)
from proxy.admission import Admitted
from proxy.auth import AccessControl
from proxy.capture import CaptureRecord, CaptureWriter, Spool
from proxy.capture.recorder import Recorder, Served
from proxy.catalog import Catalog
from proxy.config import GatewayConfig
from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout
from proxy.engines.pool import EnginePool
from proxy.errors import GatewayError
from proxy.pipeline import ServingPipeline
from proxy.rate_limit import RateLimit
from proxy.router import Route, Router
from proxy.signals import abandonment_reward
from proxy.streaming import ChatStream
from proxy.telemetry import CallTelemetry
from registry import (
    AgentVersion,
    ChangeListener,
    NotFoundError,
    SessionRoute,
    TrajectoryEnd,
    check_schema,
    create_db_engine,
    last_activity,
)
from runtime.version.overlays import Overlaid

__all__ = ["Gateway", "Served", "new_session_id", "upstream_failure"]

log = logging.getLogger(__name__)

SKEW = timedelta(seconds=1)  # how far two gateways' clocks may disagree


class Gateway:
    """Long-lived state of one gateway process."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.db = create_db_engine(config.database_url)
        check_schema(self.db)
        self.catalog = Catalog(self.db, ttl=config.catalog_ttl, timeout=config.registry_timeout)
        # Registry announcements of alias, key and grant changes (PostgreSQL only).
        self.changes = ChangeListener.for_engine(self.db, self.catalog.changed, self.catalog.expire)
        self.router = Router(
            self.catalog, self._record_placement, deadline=config.placement_deadline
        )
        self.writer = CaptureWriter(
            self.db,
            Spool(config.spool_dir),
            batch_size=config.capture_batch_size,
            flush_interval=config.capture_flush_interval,
        )
        self.telemetry = CallTelemetry(config)
        self.recorder = Recorder(config, self.writer, self.catalog, self.telemetry)
        self.access = AccessControl(self.catalog)
        self.rate_limit = RateLimit(config.rate_limit)
        self.engines = EnginePool.of(config)
        self.pipeline = ServingPipeline(
            self.engines, self.catalog.memory_index, config.upstream_timeout
        )
        self._background: set[asyncio.Task] = set()
        self.shadow_failures = 0

    async def start(self) -> None:
        await asyncio.to_thread(self.writer.start)
        asyncio.get_running_loop().add_reader(self.writer.placements, self._adopt_placements)
        self.spawn(self._sweep_idle_sessions())
        if self.changes is not None:
            self.spawn(self.changes.run())

    def _record_placement(self, route: SessionRoute) -> None:
        self.writer.submit([CaptureRecord("session_route", route)])

    def _adopt_placements(self) -> None:
        for route in self.writer.lost_placements():
            self.router.adopt(route)

    async def _sweep_idle_sessions(self) -> None:
        """Close sessions gone quiet (the trajectory ends, abandonment is a weak signal), and
        restart the capture drain should it have died."""
        while True:
            await asyncio.sleep(self.config.sweep_interval)
            try:
                await self.close_idle_sessions()
            except Exception:  # noqa: BLE001 - the sweep must outlive one bad session
                log.exception("closing idle sessions failed")
            try:
                await asyncio.to_thread(self.writer.ensure_running)
            except Exception:  # noqa: BLE001 - tried again at the next sweep
                log.exception("restarting the capture drain failed")

    async def close_idle_sessions(self) -> int:
        """End the trajectories of sessions idle here for `abandon_after`, unless another
        gateway has recorded events of them since (it serves the session now: this process
        only forgets it). Returns how many sessions this process forgot."""
        sessions = self.recorder.sessions
        idle = sessions.idle(self.config.abandon_after)
        recorded = [state for state in idle if state.recorded]
        ids = [state.trajectory.id for state in recorded]
        latest = await self.catalog.run(last_activity, ids) if ids else {}
        for state in idle:
            sessions.forget(state)
        records: list[CaptureRecord] = []
        now, clock = utcnow(), time.monotonic()
        for state in recorded:
            seen_here = now - timedelta(seconds=clock - state.last_seen)
            # Recorded after this process last saw the session (a second's grace for
            # clocks): another gateway serves it now and will end it when it goes quiet.
            if state.trajectory.id in latest and latest[state.trajectory.id] > seen_here + SKEW:
                continue
            trajectory = state.trajectory
            status = OutcomeStatus.UNKNOWN if state.outcome_reported else OutcomeStatus.ABANDONED
            ending = TrajectoryEnd(
                tenant=trajectory.tenant,
                trajectory_id=trajectory.id,
                ended_at=utcnow(),
                outcome=TrajectoryOutcome(
                    status=status, detail="closed after the session went idle"
                ),
            )
            records.append(CaptureRecord("trajectory_end", ending))
            if not state.outcome_reported:
                reward = abandonment_reward(trajectory.tenant, trajectory.id, state.last_llm_event)
                records.append(CaptureRecord("reward", reward))
        if records:
            self.recorder.submit(records)
        return len(idle)

    async def close(self) -> None:
        await self.router.drain()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.engines.aclose()
        asyncio.get_running_loop().remove_reader(self.writer.placements)
        await self.catalog.aclose()
        await asyncio.to_thread(self.writer.stop)
        await asyncio.to_thread(self.telemetry.shutdown)
        self.db.dispose()

    # --- upstream -----------------------------------------------------------------------

    async def complete(
        self, engine: UpstreamEngine, overlaid: Overlaid, sent: asyncio.Event | None = None
    ) -> dict[str, Any]:
        try:
            return await self.pipeline.complete(engine, overlaid, sent)
        except (UpstreamTimeout, UpstreamError) as error:
            raise upstream_failure(error) from None

    # --- the pipeline -------------------------------------------------------------------

    async def prepare(self, admitted: Admitted, body: dict) -> tuple[Route, Overlaid]:
        """The route (or the pinned version) and the request with its overlays applied
        (all but the harness when the call leaves it out: an optimiser brings its own)."""
        tenant = admitted.identity.tenant
        route = (
            await self.pinned(admitted.agent, admitted.pin)
            if admitted.pin is not None
            else await self.router.route(
                tenant, admitted.agent, admitted.session, minted=admitted.minted
            )
        )
        overlaid = await self.pipeline.overlay(
            body, route.version, tenant, harness=admitted.harness
        )
        return route, overlaid

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
        route, overlaid = await self.prepare(admitted, body)
        started, upstream, sent = self._send(route, overlaid)
        try:
            # The work below runs once the request is on the wire (or failed to leave).
            await sent.wait()
            if await self.router.settle(route) is not route:
                # A new session was placed before, otherwise than proposed: drop that call.
                drop(upstream)
                route, overlaid = await self.prepare(admitted, body)
                started, upstream, sent = self._send(route, overlaid)
                await sent.wait()
            capture = await self.recorder.begin(
                admitted, body, overlaid, route.version, protocol, stored_response
            )
        except BaseException:
            drop(upstream)
            raise
        try:
            response = await upstream
        except GatewayError as error:
            failed_ms = (time.perf_counter() - started) * 1000
            self.telemetry.record(capture.pending.exchange, capture.draft, failed_ms, error.code)
            raise
        restored = self.pipeline.restore(response, overlaid)
        latency_ms = (time.perf_counter() - started) * 1000
        gone = admitted.gone is not None and await admitted.gone()
        served = self.recorder.finish(capture, response, latency_ms, delivered=not gone)
        if route.shadow is not None and admitted.traffic is Traffic.USER:
            self.spawn(self.shadow(admitted, body, route.shadow))
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
        route, overlaid = await self.prepare(admitted, body)
        started, chunks, opening = self._open_stream(route, overlaid)
        try:
            if await self.router.settle(route) is not route:
                # A new session was placed before, otherwise than proposed: drop that stream.
                await _abandon(opening, chunks)
                route, overlaid = await self.prepare(admitted, body)
                started, chunks, opening = self._open_stream(route, overlaid)
        except BaseException:
            drop(opening)
            raise
        try:
            first = await opening
        except StopAsyncIteration:
            first = None
        except (UpstreamTimeout, UpstreamError) as error:
            raise upstream_failure(error) from None
        book = self.recorder.book(admitted.traffic)
        state = book.get(admitted.identity.tenant, admitted.agent, admitted.session)
        trajectory_id = state.trajectory.id if state is not None else None
        return ChatStream(
            admitted,
            body,
            protocol,
            route,
            overlaid,
            started,
            chunks,
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
        if route.shadow is not None and admitted.traffic is Traffic.USER:
            self.spawn(self.shadow(admitted, streamed.body, route.shadow))
        return served

    def _open_stream(
        self, route: Route, overlaid: Overlaid
    ) -> tuple[float, AsyncGenerator[dict], asyncio.Future]:
        """Start an upstream stream: when it started, its chunks, and its first chunk to come."""
        engine = self.pipeline.engine(route.version, route.base_url)
        chunks = self.pipeline.stream(engine, overlaid)
        return time.perf_counter(), chunks, asyncio.ensure_future(anext(chunks))

    def _send(
        self, route: Route, overlaid: Overlaid
    ) -> tuple[float, asyncio.Future, asyncio.Event]:
        """Start the upstream call: when it started, the call, and an event set once the
        request is on the wire (or failed to leave)."""
        engine = self.pipeline.engine(route.version, route.base_url)
        sent = asyncio.Event()
        upstream = asyncio.ensure_future(self.complete(engine, overlaid, sent))
        upstream.add_done_callback(lambda _: sent.set())
        return time.perf_counter(), upstream, sent

    # --- shadow -------------------------------------------------------------------------

    def spawn(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def shadow(self, admitted: Admitted, body: dict, version: AgentVersion) -> None:
        """Serve a copy to the shadow version and record it; never affects the primary."""
        try:
            served = await self.pipeline.serve(body, version, admitted.identity.tenant)
            shadowed = replace(admitted, traffic=Traffic.SHADOW)
            await self.recorder.record_exchange(
                shadowed, body, served.overlaid, version, served.response, served.latency_ms
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a shadow failure is logged, never raised
            self.shadow_failures += 1
            log.warning("shadow request to %s failed: %s", version.id, error)


def upstream_failure(error: UpstreamError | UpstreamTimeout) -> GatewayError:
    """The client's view of an upstream failure: 504 for a timeout, 429 for the model's own
    rate limit (so the agent's SDK backs off and retries), 502 for anything else."""
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


async def _abandon(opening: asyncio.Future, chunks: AsyncGenerator[dict]) -> None:
    """Stop a stream whose answer will not be used (its first chunk may be under way)."""
    drop(opening)
    await asyncio.wait([opening])
    await chunks.aclose()


def drop(call: asyncio.Future) -> None:
    """Abandon an upstream call whose answer will not be used, failure included."""
    call.cancel()
    call.add_done_callback(lambda done: done.cancelled() or done.exception())
