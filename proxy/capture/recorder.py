"""The one capture path: every protocol, MCP, OTLP and feedback records through a `Recorder`.

It owns what recording needs of the process (the sessions' states, the redactors, the seal
key, the capture writer, the recent events' owners), so no caller reaches into the gateway.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from atdp import Event, RedactionStatus, Traffic, utcnow
from proxy.capture.events import EventDocument, SessionBook, SessionState
from proxy.capture.records import CaptureRecord
from proxy.capture.writer import CaptureWriter
from proxy.catalog import Catalog
from proxy.governance import Redactor, governance_document
from proxy.signals import implicit_rewards
from registry import SealedEvent, TenantPolicy, seal_event

__all__ = ["Recorder", "sealed_copies"]

RECENT_EVENTS = 200_000  # how many events' owners feedback can check without the registry


class Recorder:
    """Builds and hands to the capture writer the records of one gateway process."""

    def __init__(self, writer: CaptureWriter, catalog: Catalog, seal_key: str | None) -> None:
        self.writer = writer
        self.catalog = catalog
        self.seal_key = seal_key
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

    def submit(self, records: list[CaptureRecord]) -> None:
        """One spool write: durable once this returns."""
        self.writer.submit(records)

    def submit_rewards(self, rewards: Iterable[Any]) -> None:
        self.submit([CaptureRecord("reward", reward) for reward in rewards])

    async def record_event(self, state: SessionState, event: EventDocument) -> EventDocument:
        """Govern, redact (and seal, if the tenant wants it) one event a user's traffic
        reported, and hand it to the capture writer with the implicit reward it implies."""
        tenant = state.trajectory.tenant
        policy = await self.catalog.policy(tenant)
        governance = governance_document(policy, training_opt_out=False, now=utcnow())
        event = {**event, "governance": governance}
        stored = self.redactor_for(policy).redact_document(event)
        records, (stored,) = self.records(state, [event], [stored], self.seal_key_for(policy))
        records += [CaptureRecord("reward", reward) for reward in implicit_rewards([stored])]
        self.submit(records)
        self.remember(tenant, state.trajectory.id, [stored["id"]])
        return stored

    async def record_reported(
        self, tenant: str, trajectory_id: uuid.UUID, event: Event, rewards: list[Any]
    ) -> Event:
        """An event the agent reported itself (`/v1/events`), redacted, with its rewards."""
        event = (await self.redactor(tenant)).redact_event(event)
        self.submit([CaptureRecord("event", event), *(CaptureRecord("reward", r) for r in rewards)])
        self.remember(tenant, trajectory_id, [str(event.id)])
        return event


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
