"""The gateway's request pipeline: identify, route, overlay, call upstream, capture.

`proxy.app` maps HTTP onto these methods; everything here is plain async Python so the
replay engine and tests can drive the same pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from atdp import (
    Event,
    Harness,
    OutcomeStatus,
    RedactionStatus,
    Traffic,
    TrajectoryOutcome,
    new_id,
    utcnow,
)
from proxy.admission import Admitted
from proxy.auth import AccessControl
from proxy.capture import CaptureRecord, CaptureWriter, Spool
from proxy.capture.events import (
    EventDocument,
    Exchange,
    PendingExchange,
    SessionBook,
    SessionState,
    begin_exchange,
    finish_exchange,
    new_trajectory,
    resumed_state,
    shown_answer,
    task_type_of,
)
from proxy.catalog import Catalog
from proxy.config import GatewayConfig
from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout
from proxy.engines.pool import EnginePool
from proxy.errors import GatewayError
from proxy.governance import Redactor, governance_document
from proxy.rate_limit import RateLimit
from proxy.router import Route, Router
from proxy.signals import abandonment_reward, implicit_rewards
from proxy.streaming import ChatStream
from proxy.telemetry import CallTelemetry
from registry import (
    AgentVersion,
    ChangeListener,
    NotFoundError,
    SealedEvent,
    SessionRoute,
    TenantPolicy,
    TrajectoryEnd,
    check_schema,
    create_db_engine,
    last_activity,
    seal_event,
    session_progress,
)
from runtime.version.overlays import Overlaid, apply_overlays, restore_response

__all__ = ["Gateway", "Served", "new_session_id", "upstream_failure"]

log = logging.getLogger(__name__)

SKEW = timedelta(seconds=1)  # how far two gateways' clocks may disagree
# Seconds a read of a session's progress may take, from its start, though `resume_wait`
# ends sooner: on a loaded machine a read under way is about to answer, not stalled.
PROGRESS_READ_FLOOR = 1.0


@dataclass
class Capture:
    """An exchange between the two phases of its capture.

    `pending` holds the raw event documents (sealed, if the tenant wants it, never stored
    in the clear); `before` and `draft` are their redacted versions.
    """

    state: SessionState
    pending: PendingExchange
    redactor: Redactor
    regenerated: uuid.UUID | None
    before: list[EventDocument]
    draft: EventDocument
    seal_key: str | None = None
    request_key: int | None = None


def _with_redacted_answer(
    redactor: Redactor, raw_llm: EventDocument, draft: EventDocument
) -> EventDocument:
    """The llm_call with its prompt as redacted in phase one and its answer redacted now."""
    answer = redactor.redact_document(
        {"action": raw_llm["action"], "governance": draft["governance"]}
    )
    return {
        **raw_llm,
        "observation": draft["observation"],
        "hidden": draft["hidden"],
        "action": answer["action"],
        "governance": answer["governance"],
    }


def sealed_copies(
    raw: list[EventDocument], redacted: list[EventDocument], key: str
) -> tuple[list[EventDocument], list[SealedEvent]]:
    """Seal the raw copy of every event redaction changed, and point the stored one at it."""
    now, kept, sealed = utcnow(), [], []
    for original, stored in zip(raw, redacted, strict=True):
        if stored["governance"]["redaction"] == RedactionStatus.REDACTED:
            sealed.append(seal_event(Event.model_validate(original), key, now))
            governance = {**stored["governance"], "sealed_ref": f"sealed:{stored['id']}"}
            stored = {**stored, "governance": governance}
        kept.append(stored)
    return kept, sealed


@dataclass
class Served:
    """What a handled request produced, for the HTTP layer's headers."""

    session: str
    trajectory_id: uuid.UUID
    event_id: uuid.UUID
    version_id: str
    upstream_ms: float  # from sending the upstream call to handling its answer


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
        self.sessions = SessionBook()
        self.shadow_sessions = SessionBook()
        self.access = AccessControl(self.catalog)
        self.rate_limit = RateLimit(config.rate_limit)
        self.recent_events: OrderedDict[str, tuple[str, uuid.UUID]] = OrderedDict()
        self.engines = EnginePool.of(config)
        self._redactors: dict[tuple[str, ...], Redactor] = {}
        self._background: set[asyncio.Task] = set()
        self.shadow_failures = 0
        self.telemetry = CallTelemetry(config)

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
        idle = self.sessions.idle(self.config.abandon_after)
        recorded = [state for state in idle if state.recorded]
        ids = [state.trajectory.id for state in recorded]
        latest = await self.catalog.run(last_activity, ids) if ids else {}
        for state in idle:
            self.sessions.forget(state)
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
            self.writer.submit(records)
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
            return await engine.complete(
                overlaid.body, model=overlaid.model, timeout=self.config.upstream_timeout, sent=sent
            )
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
        memory = await self.catalog.memory_index(route.version, tenant)
        spec = route.version.spec
        if not admitted.harness:
            spec = spec.model_copy(update={"harness": Harness()})
        return route, apply_overlays(body, spec, memory, tenant=tenant)

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
            capture = await self.begin_capture(
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
        restored = restore_response(response, overlaid)
        latency_ms = (time.perf_counter() - started) * 1000
        gone = admitted.gone is not None and await admitted.gone()
        served = self.finish_capture(capture, response, latency_ms, delivered=not gone)
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
        book = self.sessions if admitted.traffic is Traffic.USER else self.shadow_sessions
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
        served = await self.capture(
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
        engine = self.engines.engine_for(route.version, route.base_url)
        chunks = engine.stream(
            overlaid.body, model=overlaid.model, timeout=self.config.upstream_timeout
        )
        return time.perf_counter(), chunks, asyncio.ensure_future(anext(chunks))

    def _send(
        self, route: Route, overlaid: Overlaid
    ) -> tuple[float, asyncio.Future, asyncio.Event]:
        """Start the upstream call: when it started, the call, and an event set once the
        request is on the wire (or failed to leave)."""
        engine = self.engines.engine_for(route.version, route.base_url)
        sent = asyncio.Event()
        upstream = asyncio.ensure_future(self.complete(engine, overlaid, sent))
        upstream.add_done_callback(lambda _: sent.set())
        return time.perf_counter(), upstream, sent

    async def redactor(self, tenant: str) -> Redactor:
        return self.redactor_for(await self.catalog.policy(tenant))

    def redactor_for(self, policy: TenantPolicy) -> Redactor:
        """The redactor of a policy's patterns, built once per distinct set of patterns."""
        patterns = tuple(policy.redaction_patterns)
        redactor = self._redactors.get(patterns)
        if redactor is None:
            redactor = self._redactors[patterns] = Redactor(patterns)
        return redactor

    async def begin_capture(
        self,
        admitted: Admitted,
        request: dict,
        overlaid: Overlaid,
        version: AgentVersion,
        protocol: tuple[str, dict[str, Any]] | None = None,
        stored_response: dict[str, Any] | None = None,
    ) -> Capture:
        """Phase one: the request's events, governed and redacted."""
        tenant, agent, session = admitted.identity.tenant, admitted.agent, admitted.session
        traffic = admitted.traffic
        book = self.sessions if traffic is Traffic.USER else self.shadow_sessions
        state = book.get(tenant, agent, session)
        if traffic is Traffic.USER:
            state = await self._caught_up(state, admitted, version, request)
        if state is None or state.trajectory.versions.agent_version_id != version.id:
            trajectory = new_trajectory(tenant, agent, session, version, task_type_of(request))
            state = book.start(trajectory)
        policy = await self.catalog.policy(tenant)
        # Only real users' data may train: shadow and evaluation traffic never does.
        opt_out = admitted.training_opt_out or traffic is not Traffic.USER
        governance = governance_document(policy, training_opt_out=opt_out, now=utcnow())
        exchange = Exchange(
            tenant=tenant,
            agent=agent,
            session=session,
            request=request,
            overlaid=overlaid,
            version=version,
            traffic=traffic,
            governance=governance,
            protocol=protocol,
            stored_response=stored_response,
        )
        pending = begin_exchange(state, exchange)
        request_key = hash(tuple(pending.keys))
        regenerated = _retried(state, admitted, pending, request_key)
        redactor = self.redactor_for(policy)
        capture = Capture(
            state=state,
            pending=pending,
            redactor=redactor,
            regenerated=regenerated,
            request_key=request_key,
            before=[redactor.redact_document(event) for event in pending.before],
            draft=redactor.redact_document(pending.draft),
            # A stored response is read back from its call's events: with a seal key, the
            # raw copy lets a continuation show the model what the agent wrote.
            seal_key=(
                self.config.seal_key if policy.seal_raw or stored_response is not None else None
            ),
        )
        # What the request alone determines is spooled now, while the upstream works.
        self.writer.submit(self._records(capture, pending.before, capture.before)[0])
        return capture

    async def _caught_up(
        self, state: SessionState | None, admitted: Admitted, version: AgentVersion, request: dict
    ) -> SessionState | None:
        """The session's state, current with the answers the request shows again: this
        process's own when it recorded the last of them (the common case, a regeneration
        included: no registry read), else the registry's, because another gateway served
        it, or this one before a restart. Waits up to `resume_wait` for that answer to be
        committed (and for a read under way then, up to PROGRESS_READ_FLOOR from its
        start); after that, or with the registry unreachable or not answering, goes on with
        what this process has."""
        messages = request.get("messages") or []
        shown = shown_answer(messages)
        if shown is None or (
            state is not None
            and shown[1] in state.answers
            and state.trajectory.versions.agent_version_id == version.id
        ):
            return state
        try:
            resumed = await self._resumed(admitted, version, messages, shown)
        except TimeoutError:
            log.info(
                "the registry did not answer a read of session %r's progress: recording on "
                "from this request",
                admitted.session,
            )
            return state
        except Exception:  # noqa: BLE001 - capture goes on; only the linking is at stake
            log.warning("reading session %r's progress failed", admitted.session, exc_info=True)
            return state
        if resumed is None:
            log.info(
                "session %r shows an answer the registry did not hold within %.1f s (no "
                "gateway recorded it): recording on from this request",
                admitted.session,
                self.config.resume_wait,
            )
            return state
        if state is not None and state.trajectory.id == resumed.trajectory.id:
            # This process's own records may not be committed yet.
            resumed.next_seq = max(resumed.next_seq, state.next_seq)
            resumed.last_request_key = state.last_request_key
            resumed.outcome_reported = state.outcome_reported
        return self.sessions.put(resumed)

    async def _resumed(
        self, admitted: Admitted, version: AgentVersion, messages: list, shown: tuple
    ) -> SessionState | None:
        """The session's state as the registry holds it, once it holds the answer shown; None
        if it does not within `resume_wait`.

        Bounded as a whole, since a registry that does not answer hangs a read rather than
        failing it: each read may take until `resume_wait` ends or PROGRESS_READ_FLOOR from
        its start, whichever is later, then raises TimeoutError."""
        tenant, agent, session = admitted.identity.tenant, admitted.agent, admitted.session
        deadline = time.monotonic() + self.config.resume_wait
        while True:
            read = self.catalog.run(session_progress, tenant, agent, session, version.id)
            allowed = max(deadline - time.monotonic(), PROGRESS_READ_FLOOR)
            progress = await asyncio.wait_for(read, allowed)
            resumed = resumed_state(progress, messages, shown) if progress else None
            if resumed is not None or time.monotonic() >= deadline:
                return resumed
            await asyncio.sleep(0.05)

    def _records(
        self, capture: Capture, raw: list[EventDocument], events: list[EventDocument]
    ) -> tuple[list[CaptureRecord], list[EventDocument]]:
        """Records for events (and, the first time, the trajectory), and the events as stored."""
        records: list[CaptureRecord] = []
        if not capture.state.recorded:
            records.append(CaptureRecord("trajectory", capture.state.trajectory))
            capture.state.recorded = True
        if capture.seal_key:
            events, sealed = sealed_copies(raw, events, capture.seal_key)
            records += [CaptureRecord("sealed", copy) for copy in sealed]
        records += [CaptureRecord("event", event) for event in events]
        return records, events

    def finish_capture(
        self, capture: Capture, response: dict, latency_ms: float, *, delivered: bool = True
    ) -> Served:
        """Phase two: the answer, redacted, and everything handed to the capture writer.
        `delivered` false: the client left before the answer (recorded as never received)."""
        state, pending = capture.state, capture.pending
        raw_llm = finish_exchange(state, pending, response, latency_ms, delivered=delivered)
        if delivered:
            state.last_request_key = capture.request_key
        llm = _with_redacted_answer(capture.redactor, raw_llm, capture.draft)
        records, (llm,) = self._records(capture, [raw_llm], [llm])
        events = [*capture.before, llm]
        if pending.exchange.traffic is Traffic.USER:
            rewards = implicit_rewards(events, regenerated=capture.regenerated)
            records += [CaptureRecord("reward", reward) for reward in rewards]
            trajectory = state.trajectory
            self.remember(trajectory.tenant, trajectory.id, [e["id"] for e in events])
        served = Served(
            pending.exchange.session,
            state.trajectory.id,
            pending.draft_id,
            pending.exchange.version.id,
            latency_ms,
        )
        self.writer.submit(records)  # one spool write: durable before the answer leaves
        self.telemetry.record(pending.exchange, llm, latency_ms)
        return served

    async def capture(
        self,
        admitted: Admitted,
        request: dict,
        overlaid: Overlaid,
        version: AgentVersion,
        response: dict,
        latency_ms: float,
        protocol: tuple[str, dict[str, Any]] | None = None,
        stored_response: dict[str, Any] | None = None,
    ) -> Served:
        """Both phases at once, for answers that are complete already (streams, shadows)."""
        capture = await self.begin_capture(
            admitted, request, overlaid, version, protocol, stored_response
        )
        return self.finish_capture(capture, response, latency_ms)

    def remember(self, tenant: str, trajectory_id: uuid.UUID, event_ids: list[str]) -> None:
        """Recent events' owners (by id as text), so feedback on them is tenant-checked
        without the registry."""
        for event_id in event_ids:
            self.recent_events[event_id] = (tenant, trajectory_id)
        while len(self.recent_events) > 200_000:
            self.recent_events.popitem(last=False)

    # --- shadow -------------------------------------------------------------------------

    def spawn(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def shadow(self, admitted: Admitted, body: dict, version: AgentVersion) -> None:
        """Serve a copy to the shadow version and record it; never affects the primary."""
        try:
            memory = await self.catalog.memory_index(version, admitted.identity.tenant)
            overlaid = apply_overlays(body, version.spec, memory, tenant=admitted.identity.tenant)
            engine = self.engines.engine_for(version, version.spec.model.base_url)
            started = time.perf_counter()
            response = await self.complete(engine, overlaid)
            latency_ms = (time.perf_counter() - started) * 1000
            shadowed = replace(admitted, traffic=Traffic.SHADOW)
            await self.capture(shadowed, body, overlaid, version, response, latency_ms)
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


def _retried(
    state: SessionState, admitted: Admitted, pending: PendingExchange, request_key: int
) -> uuid.UUID | None:
    """The call this request regenerates (the user asked the same again), if any.

    A client's retry of a request whose answer it never received is no regeneration: the
    SDK says so (`Admitted.retry`), or the gateway recorded that answer as undelivered. The
    retry then answers what that call answered, and names it (`retry_of`).
    """
    undelivered = state.undelivered
    if undelivered is not None and undelivered[0] == request_key:
        pending.retry_of = undelivered[2]
        pending.draft["parent_id"] = undelivered[1]
        return None
    if request_key != state.last_request_key:
        return None
    if admitted.retry:
        pending.retry_of = state.last_llm_event
        return None
    return state.last_llm_event


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
