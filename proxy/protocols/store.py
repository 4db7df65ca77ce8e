"""The Responses API's stored responses: what `previous_response_id` continues.

A stored response keeps the response object and its request's own input items, and
names the response it continued: the conversation a continuation shows the model is the
chain's inputs and answers, oldest first, in chat form as the agent wrote them (before any
version's overlays), so it is served like a request whose history the agent had sent in
full. Each response stores only its own turn, so a long conversation costs no more per
turn than a short one.

Stored responses are written through the capture spool (durable before the answer leaves,
committed off the request path) and kept in memory for a while, so a continuation that
follows at once never waits for the registry. Nothing raw is at rest, as for the call's
events: when redaction found something in the call (its recorded llm_call holds the request
as the agent sent it and the answer), the gateway stores the response sealed (encrypted)
if it has a seal key, so a continuation reads it back as the agent wrote it, and redacted
by the tenant's policy if not, so a continuation served from the registry (after this
process forgot it) sees placeholders there. When redaction found nothing, which is most
calls, the response is stored as it is, with no second scan. Stored responses expire with
the tenant's retention (30 days without one, as OpenAI keeps them) and are never read by
evolution, which reads the events.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from atdp import utcnow
from proxy import jsonio
from proxy.capture import CaptureRecord
from proxy.errors import GatewayError
from proxy.gateway import Gateway, Served
from proxy.governance import Redactor
from proxy.protocols.responses import assistant_message, chat_messages
from registry import (
    NotFoundError,
    TenantPolicy,
    delete_stored_response,
    get_stored_response,
)

__all__ = ["ResponseStore", "StoredTurn"]

DEFAULT_RETENTION = timedelta(days=30)
MAX_CHAIN = 10_000  # responses a continuation may reach back through


@dataclass(frozen=True)
class StoredTurn:
    """One stored response: {"response": the Responses object, "input": the request's
    input items, each with its id} as `document`, and where it sits.

    The document is kept as JSON text: thousands of recent responses held as dicts would
    be hundreds of thousands of objects for every full garbage collection to walk, which
    measurably delayed the gateway's answers; text is one object each, never walked.
    """

    tenant: str
    session: str
    previous_id: str | None
    expires_at: datetime | None
    text: bytes

    @property
    def document(self) -> dict[str, Any]:
        return jsonio.loads(self.text)


class ResponseStore:
    """Stored responses of one gateway: the recent in memory, all in the registry."""

    def __init__(self, gateway: Gateway, capacity: int = 10_000) -> None:
        self.gateway = gateway
        self.capacity = capacity
        self._recent: OrderedDict[str, StoredTurn] = OrderedDict()

    async def save(
        self,
        tenant: str,
        agent: str,
        served: Served,
        previous_id: str | None,
        document: dict[str, Any],
    ) -> None:
        """Store a response now (a stream's, once it has ended)."""
        policy = await self.gateway.catalog.policy(tenant)
        record = self.record(policy, tenant, agent, served, previous_id, document)
        self.gateway.writer.submit([record])

    def record(
        self,
        policy: TenantPolicy,
        tenant: str,
        agent: str,
        served: Served,
        previous_id: str | None,
        document: dict[str, Any],
    ) -> CaptureRecord:
        """Keep a response in memory and return its capture record, for the caller to write
        with the call's own records (`Gateway.serve(also=...)`): one spool write a call."""
        now = utcnow()
        retention = (
            timedelta(days=policy.retention_days) if policy.retention_days else DEFAULT_RETENTION
        )
        raw = jsonio.dumps(document)
        at_rest = raw.decode()  # kept as text: the drain validates a string much faster
        key = self.gateway.config.seal_key if served.redacted else None
        if key:
            at_rest = _seal(at_rest, key)
        elif served.redacted:
            redacted = _redacted(document, self.gateway.redactor_for(policy))
            if redacted is not document:
                at_rest = jsonio.dumps(redacted).decode()
        response_id = document["response"]["id"]
        turn = StoredTurn(tenant, served.session, previous_id, now + retention, raw)
        self._recent[response_id] = turn
        while len(self._recent) > self.capacity:
            self._recent.popitem(last=False)
        # A document of `registry.StoredResponse`, validated by the capture drain (which
        # reads the ids and times as orjson writes them).
        stored = {
            "id": response_id,
            "tenant": tenant,
            "agent": agent,
            "session": served.session,
            "trajectory_id": served.trajectory_id,
            "event_id": served.event_id,
            "previous_id": previous_id,
            "document": at_rest,
            "sealed": bool(key),
            "created_at": now,
            "expires_at": turn.expires_at,
        }
        return CaptureRecord("stored_response", stored)

    async def turn(self, tenant: str, response_id: str, *, param: str) -> StoredTurn:
        """The tenant's response; 404 if there is none, it is another tenant's, deleted
        or expired."""
        kept = self._recent.get(response_id)
        if kept is not None and kept.tenant == tenant and not _expired(kept.expires_at):
            return kept
        await asyncio.to_thread(self.gateway.writer.flush, 5.0)
        try:
            record = await self.gateway.catalog.run(get_stored_response, tenant, response_id)
        except NotFoundError:
            raise _not_found(response_id, param) from None
        text = record.document
        if record.sealed:
            if not self.gateway.config.seal_key:
                raise GatewayError(
                    500,
                    f"Response {response_id!r} is sealed and this gateway has no seal key.",
                    code="server_error",
                )
            text = _unseal(text, self.gateway.config.seal_key)
        return StoredTurn(
            tenant, record.session, record.previous_id, record.expires_at, text.encode()
        )

    async def conversation(
        self, tenant: str, response_id: str, *, param: str
    ) -> tuple[str, list[dict[str, Any]]]:
        """(the session, the chat messages) of the conversation `response_id` ended."""
        chain: list[StoredTurn] = []
        current: str | None = response_id
        while current is not None and len(chain) < MAX_CHAIN:
            chain.append(await self.turn(tenant, current, param=param))
            current = chain[-1].previous_id
        messages: list[dict[str, Any]] = []
        for turn in reversed(chain):
            document = turn.document
            messages += chat_messages(document["input"], "input")
            answer = assistant_message(document["response"])
            if answer is not None:
                messages.append(answer)
        return chain[0].session, messages

    async def delete(self, tenant: str, response_id: str) -> None:
        """Delete the tenant's response (404 if it has none by that id)."""
        kept = self._recent.get(response_id)
        if kept is not None and kept.tenant == tenant:
            del self._recent[response_id]
        await asyncio.to_thread(self.gateway.writer.flush, 5.0)
        found = await self.gateway.catalog.run(delete_stored_response, tenant, response_id)
        if not found:
            raise _not_found(response_id, "response_id")


def _redacted(document: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """The stored copy with every text a person, an agent or a model wrote redacted: the
    items' texts, arguments and tool outputs, the instructions, tools, user and metadata;
    `document` itself when nothing was found.

    Only those are walked, not the whole document: the rest (ids, times, counts, echoed
    settings) holds no such text, and walking it all took measurable event-loop time on
    every stored call (benchmarks/RESULTS.md, "Gateway overhead by protocol")."""
    changed = False

    def kept(new: Any, old: Any) -> Any:
        nonlocal changed
        changed = changed or new is not old
        return new

    def text(value: Any) -> Any:
        return kept(redactor.redact_text(value).text, value) if isinstance(value, str) else value

    def parts(content: Any) -> Any:
        if isinstance(content, list):
            return [
                {**part, "text": text(part["text"])}
                if isinstance(part, dict) and "text" in part
                else part
                for part in content
            ]
        return text(content)

    def item(entry: dict[str, Any]) -> dict[str, Any]:
        entry = dict(entry)
        for key in ("content", "output"):
            if key in entry:
                entry[key] = parts(entry[key])
        if "arguments" in entry:
            entry["arguments"] = kept(redactor.redact_json(entry["arguments"]), entry["arguments"])
        return entry

    response = dict(document["response"])
    response["output"] = [item(entry) for entry in response.get("output") or []]
    for key in ("instructions", "tools", "user", "metadata"):
        if response.get(key):
            response[key] = kept(redactor.redact_json(response[key]), response[key])
    redacted = {"response": response, "input": [item(entry) for entry in document["input"]]}
    return redacted if changed else document


def _expired(expires_at: datetime | None) -> bool:
    return expires_at is not None and expires_at <= utcnow()


def _not_found(response_id: str, param: str) -> GatewayError:
    return GatewayError(
        404,
        f"No response with id {response_id!r} for this tenant (it may have expired, been "
        "deleted, or been created with store: false).",
        param=param,
        code="response_not_found",
    )


def _seal(text: str, key: str) -> str:
    from cryptography.fernet import Fernet

    return Fernet(key.encode()).encrypt(text.encode()).decode()


def _unseal(token: str, key: str) -> str:
    from cryptography.fernet import Fernet

    return Fernet(key.encode()).decrypt(token.encode()).decode()
