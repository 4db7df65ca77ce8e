"""The one capture path: every protocol, MCP, OTLP and feedback records through a `Recorder`.

It owns what recording needs of the process (the sessions' states, the redactors, the seal
key, the capture writer, the recent events' owners), so no caller reaches into the gateway.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from atdp import (
    BinaryValue,
    Event,
    EventKind,
    EventMetadata,
    Observation,
    Outcome,
    OutcomeStatus,
    RedactionStatus,
    ReplayInfo,
    Reward,
    RewardSource,
    RewardValue,
    ToolCallAction,
    Traffic,
    TrajectoryOutcome,
    new_id,
    utcnow,
)
from proxy.admission import Admitted
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
)
from proxy.capture.records import CaptureRecord
from proxy.capture.writer import CaptureWriter
from proxy.catalog import Catalog
from proxy.config import GatewayConfig
from proxy.governance import Redactor, governance_document
from proxy.signals import abandonment_reward, implicit_rewards
from proxy.telemetry import CallTelemetry
from registry import (
    AgentVersion,
    NotFoundError,
    SealedEvent,
    TenantPolicy,
    TrajectoryEnd,
    get_event,
    get_trajectory,
    last_activity,
    list_trajectories,
    next_event_seq,
    seal_event,
    session_progress,
)
from runtime.version.overlays import Overlaid

__all__ = ["Capture", "Recorder", "Served", "sealed_copies"]

log = logging.getLogger(__name__)

RECENT_EVENTS = 200_000  # how many events' owners feedback can check without the registry
# Seconds a read of a session's progress may take, from its start, though `resume_wait`
# ends sooner: on a loaded machine a read under way is about to answer, not stalled.
PROGRESS_READ_FLOOR = 1.0
SKEW = timedelta(seconds=1)  # how far two gateways' clocks may disagree


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


@dataclass
class Served:
    """What a handled request produced, for the HTTP layer's headers."""

    session: str
    trajectory_id: uuid.UUID
    event_id: uuid.UUID
    version_id: str
    upstream_ms: float  # from sending the upstream call to handling its answer


class Recorder:
    """Builds and hands to the capture writer the records of one gateway process."""

    def __init__(
        self,
        config: GatewayConfig,
        writer: CaptureWriter,
        catalog: Catalog,
        telemetry: CallTelemetry,
    ) -> None:
        self.writer = writer
        self.catalog = catalog
        self.telemetry = telemetry
        self.seal_key = config.seal_key
        self.resume_wait = config.resume_wait
        self.sessions = SessionBook()
        self.shadow_sessions = SessionBook()
        self.recent_events: OrderedDict[str, tuple[str, uuid.UUID]] = OrderedDict()
        self._redactors: dict[tuple[str, ...], Redactor] = {}

    def book(self, traffic: Traffic) -> SessionBook:
        """The sessions of a kind of traffic: users' own, or the shadow copies'."""
        return self.sessions if traffic is Traffic.USER else self.shadow_sessions

    async def redactor(self, tenant: str) -> Redactor:
        return self.redactor_for(await self.catalog.policy(tenant))

    def redactor_for(self, policy: TenantPolicy) -> Redactor:
        """The redactor of a policy's patterns, built once per distinct set of patterns."""
        patterns = tuple(policy.redaction_patterns)
        redactor = self._redactors.get(patterns)
        if redactor is None:
            redactor = self._redactors[patterns] = Redactor(patterns)
        return redactor

    def seal_key_for(self, policy: TenantPolicy, *, always: bool = False) -> str | None:
        """The key raw copies are sealed with: when the tenant wants them, or `always`."""
        return self.seal_key if policy.seal_raw or always else None

    def remember(self, tenant: str, trajectory_id: uuid.UUID, event_ids: list[str]) -> None:
        """Recent events' owners (by id as text), so feedback on them is tenant-checked
        without the registry."""
        for event_id in event_ids:
            self.recent_events[event_id] = (tenant, trajectory_id)
        while len(self.recent_events) > RECENT_EVENTS:
            self.recent_events.popitem(last=False)

    def records(
        self,
        state: SessionState,
        raw: list[EventDocument],
        events: list[EventDocument],
        seal_key: str | None,
    ) -> tuple[list[CaptureRecord], list[EventDocument]]:
        """Records for events (and, the first time, the trajectory), and the events as stored."""
        records: list[CaptureRecord] = []
        if not state.recorded:
            records.append(CaptureRecord("trajectory", state.trajectory))
            state.recorded = True
        if seal_key:
            events, sealed = sealed_copies(raw, events, seal_key)
            records += [CaptureRecord("sealed", copy) for copy in sealed]
        records += [CaptureRecord("event", event) for event in events]
        return records, events

    def governed_records(
        self,
        state: SessionState,
        policy: TenantPolicy,
        raw: list[EventDocument],
        events: list[EventDocument],
        rewards: Iterable[Any],
    ) -> tuple[list[CaptureRecord], list[EventDocument]]:
        """The records of events already governed and redacted (`events`, from `raw`):
        sealed copies if the tenant wants them, the rewards they imply, the trajectory the
        first time; and the events as stored. Their owners are remembered for feedback."""
        records, stored = self.records(state, raw, events, self.seal_key_for(policy))
        records += [CaptureRecord("reward", reward) for reward in rewards]
        trajectory = state.trajectory
        self.remember(trajectory.tenant, trajectory.id, [event["id"] for event in stored])
        return records, stored

    def submit(self, records: list[CaptureRecord]) -> None:
        """One spool write: durable once this returns."""
        self.writer.submit(records)

    async def flush(self, timeout: float = 5.0) -> bool:
        """Wait (up to `timeout` seconds) until every record submitted is in the registry,
        for a read of the registry that must see them; False if they are not by then."""
        return await asyncio.to_thread(self.writer.flush, timeout)

    def trajectory_of(self, admitted: Admitted) -> uuid.UUID | None:
        """The trajectory the request's session records to here, if it has one yet."""
        state = self.book(admitted.traffic).get(
            admitted.identity.tenant, admitted.agent, admitted.session
        )
        return state.trajectory.id if state is not None else None

    def held_session(self, tenant: str, agent: str, session: str) -> SessionState | None:
        """This process's state of a user's session, marked active now; None if it holds
        none (the session starts here, or another gateway serves it)."""
        state = self.sessions.get(tenant, agent, session)
        if state is not None:
            state.last_seen = time.monotonic()
        return state

    def open_session(
        self, tenant: str, agent: str, session: str, version: AgentVersion
    ) -> SessionState:
        """A new trajectory for a user's session that starts here, served by `version`."""
        return self.sessions.start(new_trajectory(tenant, agent, session, version))

    async def locate(
        self,
        tenant: str,
        *,
        event_id: uuid.UUID | None = None,
        trajectory_id: uuid.UUID | None = None,
        agent: str | None = None,
        session: str | None = None,
    ) -> tuple[uuid.UUID, uuid.UUID | None]:
        """(trajectory id, event id) of what feedback or a reported event names (an event,
        else a trajectory, else a session's latest trajectory), if `tenant` owns it: from
        what this process recorded, else from the registry. NotFoundError otherwise."""
        if event_id is not None:
            recent = self.recent_events.get(str(event_id))
            if recent is not None:
                if recent[0] != tenant:
                    raise NotFoundError("event", event_id)
                return recent[1], event_id
            event = await self.catalog.run(get_event, tenant, event_id)
            return event.trajectory_id, event.id
        if trajectory_id is not None:
            state = self.sessions.find_trajectory(trajectory_id)
            if state is None or state.trajectory.tenant != tenant:
                await self.catalog.run(get_trajectory, tenant, trajectory_id)
            return trajectory_id, None
        state = self.sessions.find_session(tenant, session, agent)
        if state is not None:
            return state.trajectory.id, None
        found = await self.catalog.run(
            lambda s: list_trajectories(s, tenant, agent=agent, session_id=session, limit=1)
        )
        if not found:
            raise NotFoundError("session", session)
        return found[0].id, None

    async def record_event(self, state: SessionState, event: EventDocument) -> EventDocument:
        """Govern, redact (and seal, if the tenant wants it) one event a user's traffic
        reported, and hand it to the capture writer with the implicit reward it implies."""
        tenant = state.trajectory.tenant
        policy = await self.catalog.policy(tenant)
        governance = governance_document(policy, training_opt_out=False, now=utcnow())
        event = {**event, "governance": governance}
        redacted = self.redactor_for(policy).redact_document(event)
        rewards = implicit_rewards([redacted])
        records, (stored,) = self.governed_records(state, policy, [event], [redacted], rewards)
        self.submit(records)
        return stored

    async def record_feedback(
        self,
        tenant: str,
        trajectory_id: uuid.UUID,
        event_id: uuid.UUID | None,
        values: list[tuple[str, RewardValue, str | None]],
    ) -> list[Reward]:
        """A user's explicit feedback on a trajectory (or one of its events): a reward per
        (name, value, critique), the critiques and corrections redacted like any captured
        text (they are the user's own words)."""
        redactor = await self.redactor(tenant)
        now = utcnow()
        rewards = [
            Reward(
                id=new_id(),
                tenant=tenant,
                trajectory_id=trajectory_id,
                event_id=event_id,
                name=name,
                value=value,
                critique=redactor.redact_text(critique).text if critique else critique,
                source=RewardSource.EXPLICIT,
                created_at=now,
            )
            for name, value, critique in values
        ]
        self.submit([CaptureRecord("reward", reward) for reward in rewards])
        return rewards

    async def record_reported(
        self,
        tenant: str,
        trajectory_id: uuid.UUID,
        kind: EventKind,
        *,
        parent_id: uuid.UUID | None = None,
        observation: Observation | None = None,
        action: ToolCallAction | None = None,
        outcome: Outcome | None = None,
        replay: ReplayInfo,
    ) -> Event:
        """An event the agent reported itself (`/v1/events`), next in its trajectory and
        redacted; a task outcome with a verdict is also a `task_success` reward."""
        state = self.sessions.find_trajectory(trajectory_id)
        if state is not None:
            state.last_seen = time.monotonic()  # the session is active here, not idle
            seq, session = state.seq(), state.trajectory.session
            parent_id = parent_id or state.last_llm_event
            state.outcome_reported = state.outcome_reported or kind is EventKind.TASK_OUTCOME
        else:
            seq, session = await self._continued(tenant, trajectory_id)
        event = Event(
            id=new_id(),
            trajectory_id=trajectory_id,
            seq=seq,
            kind=kind,
            parent_id=parent_id,
            created_at=utcnow(),
            observation=observation,
            action=action,
            outcome=outcome,
            metadata=EventMetadata(tenant=tenant, session=session),
            replay=replay,
        )
        rewards: list[Reward] = []
        if kind is EventKind.TASK_OUTCOME and outcome is not None and outcome.success is not None:
            rewards.append(
                Reward(
                    id=new_id(),
                    tenant=tenant,
                    trajectory_id=trajectory_id,
                    event_id=event.id,
                    name="task_success",
                    value=BinaryValue(value=outcome.success),
                    critique=outcome.error_message,
                    source=RewardSource.TEST,
                    created_at=utcnow(),
                )
            )
        event = (await self.redactor(tenant)).redact_event(event)
        self.submit([CaptureRecord("event", event), *(CaptureRecord("reward", r) for r in rewards)])
        self.remember(tenant, trajectory_id, [str(event.id)])
        return event

    async def _continued(self, tenant: str, trajectory_id: uuid.UUID) -> tuple[int, str]:
        """(the next sequence number, the session) of a trajectory this process no longer
        holds (after a restart): from the registry, after the last stored event."""
        await self.flush()
        trajectory = await self.catalog.run(get_trajectory, tenant, trajectory_id)
        return await self.catalog.run(next_event_seq, tenant, trajectory_id), trajectory.session

    # --- an exchange with a model, in two phases around the upstream call ------------------

    async def begin(
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
        book = self.book(traffic)
        state = book.get(tenant, agent, session)
        if traffic is Traffic.USER:
            state = await self._caught_up(state, admitted, version, request)
        if state is None or state.trajectory.versions.agent_version_id != version.id:
            trajectory = new_trajectory(tenant, agent, session, version, overlaid.task_type)
            state = book.start(trajectory)
        policy = admitted.policy
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
            seal_key=self.seal_key_for(policy, always=stored_response is not None),
        )
        # What the request alone determines is spooled now, while the upstream works.
        self.submit(self.records(state, pending.before, capture.before, capture.seal_key)[0])
        return capture

    async def _caught_up(
        self, state: SessionState | None, admitted: Admitted, version: AgentVersion, request: dict
    ) -> SessionState | None:
        """The session's state, current with the answers the request shows again: this
        process's own when it recorded the last of them (the common case, a regeneration
        included: no registry read), else the registry's, because another gateway served
        it, or this one before a restart. With the registry unreachable or not answering,
        goes on with what this process has."""
        try:
            return await self._resumed(state, admitted, version, request.get("messages") or [])
        except TimeoutError:
            log.info(
                "the registry did not answer a read of session %r's progress: recording on "
                "from this request",
                admitted.session,
            )
        except Exception:  # noqa: BLE001 - capture goes on; only the linking is at stake
            log.warning("reading session %r's progress failed", admitted.session, exc_info=True)
        return state

    async def _resumed(
        self, state: SessionState | None, admitted: Admitted, version: AgentVersion, messages: list
    ) -> SessionState | None:
        """`state`, unless the request shows an answer it did not record: then the session's
        state as the registry holds it, once it holds that answer, waiting up to
        `resume_wait` for it to be committed; `state` still if it is not by then.

        Bounded as a whole, since a registry that does not answer hangs a read rather than
        failing it: each read may take until `resume_wait` ends or PROGRESS_READ_FLOOR from
        its start (a read under way then is about to answer, not stalled), whichever is
        later, then raises TimeoutError."""
        shown = shown_answer(messages)
        if shown is None or (
            state is not None
            and shown[1] in state.answers
            and state.trajectory.versions.agent_version_id == version.id
        ):
            return state
        tenant, agent, session = admitted.identity.tenant, admitted.agent, admitted.session
        deadline = time.monotonic() + self.resume_wait
        while True:
            read = self.catalog.run(session_progress, tenant, agent, session, version.id)
            allowed = max(deadline - time.monotonic(), PROGRESS_READ_FLOOR)
            progress = await asyncio.wait_for(read, allowed)
            resumed = resumed_state(progress, messages, shown, state) if progress else None
            if resumed is not None:
                return self.sessions.put(resumed)
            if time.monotonic() >= deadline:
                log.info(
                    "session %r shows an answer the registry did not hold within %.1f s (no "
                    "gateway recorded it): recording on from this request",
                    session,
                    self.resume_wait,
                )
                return state
            await asyncio.sleep(0.05)

    def finish(
        self, capture: Capture, response: dict, latency_ms: float, *, delivered: bool = True
    ) -> Served:
        """Phase two: the answer, redacted, and everything handed to the capture writer.
        `delivered` false: the client left before the answer (recorded as never received)."""
        state, pending = capture.state, capture.pending
        raw_llm = finish_exchange(state, pending, response, latency_ms, delivered=delivered)
        if delivered:
            state.last_request_key = capture.request_key
        llm = _with_redacted_answer(capture.redactor, raw_llm, capture.draft)
        records, (llm,) = self.records(state, [raw_llm], [llm], capture.seal_key)
        events = [*capture.before, llm]
        if pending.exchange.traffic is Traffic.USER:
            trajectory = state.trajectory
            self.remember(trajectory.tenant, trajectory.id, [e["id"] for e in events])
            rewards = implicit_rewards(events, regenerated=capture.regenerated)
            records += [CaptureRecord("reward", reward) for reward in rewards]
        served = Served(
            pending.exchange.session,
            state.trajectory.id,
            pending.draft_id,
            pending.exchange.version.id,
            latency_ms,
        )
        self.submit(records)  # one spool write: durable before the answer leaves
        self.telemetry.record(pending.exchange, llm, latency_ms)
        return served

    def failed(self, capture: Capture, latency_ms: float, error_code: str | None) -> None:
        """An exchange whose upstream call failed: only its telemetry is recorded (its
        request's events are, in phase one)."""
        self.telemetry.record(capture.pending.exchange, capture.draft, latency_ms, error_code)

    async def record_exchange(
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
        capture = await self.begin(admitted, request, overlaid, version, protocol, stored_response)
        return self.finish(capture, response, latency_ms)

    # --- sessions gone quiet --------------------------------------------------------------

    async def close_idle_sessions(self, abandon_after: float) -> int:
        """End the trajectories of sessions idle here for `abandon_after` seconds, unless
        another gateway has recorded events of them since (it serves the session now: this
        process only forgets it). Returns how many sessions this process forgot."""
        idle = self.sessions.idle(abandon_after)
        recorded = [state for state in idle if state.recorded]
        ids = [state.trajectory.id for state in recorded]
        latest = await self.catalog.run(last_activity, ids) if ids else {}
        for state in idle:
            self.sessions.forget(state)
        now, clock = utcnow(), time.monotonic()
        records: list[CaptureRecord] = []
        for state in recorded:
            seen_here = now - timedelta(seconds=clock - state.last_seen)
            # Recorded after this process last saw the session (a second's grace for
            # clocks): another gateway serves it now and will end it when it goes quiet.
            if state.trajectory.id in latest and latest[state.trajectory.id] > seen_here + SKEW:
                continue
            records += _ending(state)
        if records:
            self.submit(records)
        return len(idle)


def _ending(state: SessionState) -> list[CaptureRecord]:
    """The end of an idle session's trajectory; abandoned, a weak negative reward, unless
    the agent reported its outcome."""
    trajectory = state.trajectory
    status = OutcomeStatus.UNKNOWN if state.outcome_reported else OutcomeStatus.ABANDONED
    ending = TrajectoryEnd(
        tenant=trajectory.tenant,
        trajectory_id=trajectory.id,
        ended_at=utcnow(),
        outcome=TrajectoryOutcome(status=status, detail="closed after the session went idle"),
    )
    records = [CaptureRecord("trajectory_end", ending)]
    if not state.outcome_reported:
        reward = abandonment_reward(trajectory.tenant, trajectory.id, state.last_llm_event)
        records.append(CaptureRecord("reward", reward))
    return records


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
