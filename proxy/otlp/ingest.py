"""OTLP ingest: the GenAI spans of agents that do not route through the gateway, recorded as
trajectories, governed, redacted and written like the gateway's own captures.

An export is handled in two steps. First, with awaits: which operations each trace holds,
whose agent and session it is (authorised like every gateway request), which version is in
force for that session (the router's placement, as for a served call) and what the registry
holds of the trace already. Then, without awaits, so no other export of the same trace can
interleave: its events, built on the trace's state, governed, redacted, validated, and handed
to the capture writer in one spool write.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from pydantic import ValidationError
from sqlmodel import Session, select

from atdp import Event, Trajectory, utcnow
from proxy.capture import CaptureRecord
from proxy.capture.events import EventDocument, SessionState, new_trajectory, task_type_of
from proxy.errors import GatewayError
from proxy.governance import Redactor, governance_document
from proxy.otlp.decode import Span
from proxy.otlp.genai import (
    INVOKE_AGENT,
    InvalidSpan,
    ModelCall,
    ToolRun,
    agent_name,
    conversation_id,
    read_span,
)
from proxy.otlp.trace import TraceBook, TraceRecorder, TraceState, trajectory_id
from proxy.service import GatewayService
from proxy.signals import implicit_rewards
from registry import ApiKeyIdentity, NotFoundError, TenantPolicy, get_trajectory, is_unreachable
from registry.tables import EventRow

__all__ = ["IngestResult", "StoredTrace", "TraceIngest", "stored_traces"]

log = logging.getLogger(__name__)

_SESSION = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
_AGENT_SOURCES = (
    "an ingested trace's agent is named by the X-Evoplane-Agent header, else the spans' "
    "gen_ai.agent.name, else the resource's service.name"
)


@dataclass
class IngestResult:
    """What became of an export's spans: the OTLP response says it."""

    ignored: int = 0
    rejections: list[str] = field(default_factory=list)
    trajectories: list[uuid.UUID] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return len(self.rejections)

    def reject(self, span: Span, reason: str) -> None:
        self.rejections.append(f"span {span.span_id} ({span.name[:80]}): {reason}")

    def message(self) -> str:
        """OTLP's `partial_success.error_message`: the rejections, then a warning about
        ignored spans; empty when every span was recorded."""
        parts = []
        if self.rejections:
            shown = "; ".join(self.rejections[:3])
            more = f" (and {self.rejected - 3} more)" if self.rejected > 3 else ""
            parts.append(f"{self.rejected} GenAI span(s) rejected: {shown}{more}")
        if self.ignored:
            parts.append(
                f"{self.ignored} span(s) ignored: not a GenAI model call, tool run or agent run"
            )
        return ". ".join(parts)


@dataclass
class _Trace:
    """The spans of one trace in one export, and the GenAI operations among them."""

    trace_id: str
    spans: list[Span] = field(default_factory=list)
    operations: list[ModelCall | ToolRun] = field(default_factory=list)


@dataclass(frozen=True)
class StoredTrace:
    """What the registry holds of an ingested trace: its trajectory, the last sequence
    number of its events (-1 for none) and, when asked for, the spans they came from."""

    trajectory: Trajectory
    last_seq: int
    spans: frozenset[str] = frozenset()


@dataclass
class _Plan:
    trace: _Trace
    state: TraceState
    last_seq: int  # the last sequence number the registry holds of the trajectory (-1)


class TraceIngest:
    """Records OTLP exports for one gateway; remembers recent traces to continue them."""

    def __init__(self, service: GatewayService) -> None:
        self.service = service
        self.book = TraceBook()

    async def ingest(
        self,
        identity: ApiKeyIdentity,
        spans: list[Span],
        *,
        agent: str | None = None,
        training_opt_out: bool = False,
    ) -> IngestResult:
        """Record an export's spans for the key's tenant; `agent` names the agent of every
        trace (the X-Evoplane-Agent header).

        Raises:
            GatewayError: 404 or 403 when a trace's agent does not exist or is not the
                tenant's; nothing of the export is written then.
        """
        result = IngestResult()
        traces = _traces(spans, result)
        if not traces:
            return result
        tenant = identity.tenant
        ids = [trajectory_id(tenant, trace.trace_id) for trace in traces]
        stored = await self._stored(tenant, ids)
        plans = [await self._plan(identity, trace, agent, stored, result) for trace in traces]
        policy = await self.service.catalog.policy(tenant)
        records = [
            record
            for plan in plans
            if plan is not None
            for record in self._record(plan, policy, training_opt_out, result)
        ]
        if records:
            self.service.recorder.submit(records)  # one spool write: durable before the answer
        return result

    async def _stored(self, tenant: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, StoredTrace]:
        """What the registry holds of these trajectories (with the spans recorded, for those
        this gateway does not remember); nothing while it is unreachable (the traces are then
        taken as new, and their ids keep a re-sent span single)."""
        forgotten = [trajectory for trajectory in ids if self.book.get(trajectory) is None]
        try:
            return await self.service.catalog.read(stored_traces, tenant, ids, forgotten)
        except Exception as error:
            if not is_unreachable(error):
                raise
            log.warning("registry unreachable; ingesting %d trace(s) as new", len(ids))
            return {}

    async def _plan(
        self,
        identity: ApiKeyIdentity,
        trace: _Trace,
        agent: str | None,
        stored: dict[uuid.UUID, StoredTrace],
        result: IngestResult,
    ) -> _Plan | None:
        """The trace's state to record on: remembered, stored, or new (then routed)."""
        tenant = identity.tenant
        trajectory = trajectory_id(tenant, trace.trace_id)
        state = self.book.get(trajectory)
        found = stored.get(trajectory)
        if state is None and found is not None:
            await self._authorize(identity, found.trajectory.agent)
            version = await self.service.catalog.version(found.trajectory.versions.agent_version_id)
            session = SessionState(found.trajectory, recorded=True)
            state = TraceState(session, version, spans=set(found.spans))
        elif state is None:
            state = await self._new_trace(identity, trace, agent, trajectory, result)
        else:
            await self._authorize(identity, state.session.trajectory.agent)
        if state is None:
            return None
        return _Plan(trace, state, found.last_seq if found is not None else -1)

    async def _new_trace(
        self,
        identity: ApiKeyIdentity,
        trace: _Trace,
        agent: str | None,
        trajectory: uuid.UUID,
        result: IngestResult,
    ) -> TraceState | None:
        agent = agent or _first(trace, agent_name) or _service_name(trace)
        await self._authorize(identity, agent)
        session = (_first(trace, conversation_id) or trace.trace_id)[:200]
        if not _SESSION.match(session):
            for operation in trace.operations:
                result.reject(operation.span, "gen_ai.conversation.id holds control characters")
            return None
        router = self.service.router
        route = await router.settle(await router.route(identity.tenant, agent, session))
        started = min(operation.span.start_unix_nano for operation in trace.operations)
        task_type = task_type_of({"metadata": {"task_type": _first(trace, _task_type)}})
        record = new_trajectory(identity.tenant, agent, session, route.version, task_type)
        record = record.model_copy(
            update={"id": trajectory, "started_at": datetime.fromtimestamp(started / 1e9, UTC)}
        )
        return TraceState(SessionState(record), route.version)

    async def _authorize(self, identity: ApiKeyIdentity, agent: str | None) -> None:
        if not agent:
            raise GatewayError(
                400, f"No agent: {_AGENT_SOURCES}.", param="X-Evoplane-Agent", code="no_agent"
            )
        try:
            await self.service.access.authorize(identity, agent)
        except GatewayError as error:
            raise GatewayError(
                error.status,
                f"{error.message} ({_AGENT_SOURCES}.)",
                param="X-Evoplane-Agent",
                code=error.code,
            ) from None

    def _record(
        self, plan: _Plan, policy: TenantPolicy, opt_out: bool, result: IngestResult
    ) -> list[CaptureRecord]:
        """The trace's records: its trajectory (the first time), events and rewards."""
        state = self.book.keep(plan.state)
        session = state.session
        # Events reported over /v1/events take sequence numbers from the registry.
        session.next_seq = max(session.next_seq, plan.last_seq + 1)
        governance = governance_document(policy, training_opt_out=opt_out, now=utcnow())
        recorder = TraceRecorder(state, governance, model_calls=_has_model_calls(state, plan.trace))
        redactor = self.service.recorder.redactor_for(policy)
        raw, events, rewards = [], [], []
        for operation in plan.trace.operations:
            recorded = _governed(recorder, redactor, operation, result)
            if recorded is None:
                continue
            kept, stored, regenerated = recorded
            raw += kept
            events += stored
            rewards += implicit_rewards(stored, regenerated=regenerated)
        if not events:
            return []
        return self._records(state, policy, raw, events, rewards, result)

    def _records(
        self,
        state: TraceState,
        policy: TenantPolicy,
        raw: list[EventDocument],
        events: list[EventDocument],
        rewards: list[Any],
        result: IngestResult,
    ) -> list[CaptureRecord]:
        recorder = self.service.recorder
        records, _ = recorder.governed_records(state.session, policy, raw, events, rewards)
        result.trajectories.append(state.session.trajectory.id)
        return records


def _governed(
    recorder: TraceRecorder,
    redactor: Redactor,
    operation: ModelCall | ToolRun,
    result: IngestResult,
) -> tuple[list[EventDocument], list[EventDocument], Any] | None:
    """One operation's events (raw, and redacted as stored) and the call it regenerates;
    None, with the state as it was, when they are not valid ATDP (the span is rejected)."""
    restore = recorder.state.checkpoint()
    try:
        recorded = recorder.record(operation)
        stored = [redactor.redact_document(event) for event in recorded.events]
        for event in stored:
            Event.model_validate(event)
    except ValidationError as error:
        restore()
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        result.reject(operation.span, f"{where}: {first['msg']}")
        return None
    return recorded.events, stored, recorded.regenerated


def _traces(spans: list[Span], result: IngestResult) -> list[_Trace]:
    """The export's traces with GenAI operations, each in span start order (a parent before
    a child that starts with it); invalid GenAI spans rejected, the rest counted ignored."""
    traces: dict[str, _Trace] = {}
    for span in spans:
        trace = traces.setdefault(span.trace_id, _Trace(span.trace_id))
        trace.spans.append(span)
        try:
            operation = read_span(span)
        except InvalidSpan as error:
            result.reject(span, str(error))
            continue
        if operation is None:
            result.ignored += 1
        else:
            trace.operations.append(operation)
    found = [trace for trace in traces.values() if trace.operations]
    for trace in found:
        trace.operations.sort(key=lambda o: (o.span.start_unix_nano, -o.span.end_unix_nano))
    return found


def _first(trace: _Trace, read) -> str | None:
    """The first value `read` finds on the trace's spans, GenAI operations first."""
    spans = [operation.span for operation in trace.operations] + trace.spans
    for span in spans:
        try:
            value = read(span)
        except InvalidSpan:
            continue
        if value:
            return value
    return None


def _service_name(trace: _Trace) -> str | None:
    name = trace.operations[0].span.resource.get("service.name")
    return name if isinstance(name, str) else None


def _task_type(span: Span) -> str | None:
    value = span.attributes.get("evoplane.task_type", span.resource.get("evoplane.task_type"))
    return value if isinstance(value, str) else None


def _has_model_calls(state: TraceState, trace: _Trace) -> bool:
    return state.session.last_llm_event is not None or any(
        isinstance(operation, ModelCall) and operation.operation != INVOKE_AGENT
        for operation in trace.operations
    )


def stored_traces(
    session: Session, tenant: str, ids: list[uuid.UUID], with_spans: list[uuid.UUID]
) -> dict[uuid.UUID, StoredTrace]:
    """The tenant's trajectories among `ids`, with their last sequence numbers, and for
    those in `with_spans` the spans their events came from."""
    statement = (
        select(EventRow.trajectory_id, sa.func.max(EventRow.seq))
        .where(EventRow.trajectory_id.in_(ids), EventRow.tenant == tenant)
        .group_by(EventRow.trajectory_id)
    )
    last_seq = dict(session.exec(statement).all())
    span_ids = EventRow.body[("metadata", "extra", "otel", "span_id")].as_string()
    spans: dict[uuid.UUID, set[str]] = {}
    statement = select(EventRow.trajectory_id, span_ids).where(
        EventRow.trajectory_id.in_(with_spans), EventRow.tenant == tenant
    )
    for trajectory, span in session.exec(statement):
        spans.setdefault(trajectory, set()).add(span)
    found = {}
    for trajectory in ids:
        try:
            record = get_trajectory(session, tenant, trajectory)
        except NotFoundError:
            continue
        found[trajectory] = StoredTrace(
            record, last_seq.get(trajectory, -1), frozenset(spans.get(trajectory, ()))
        )
    return found
