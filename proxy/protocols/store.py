"""The Responses API's stored responses: what `previous_response_id` continues.

A stored response keeps, besides the response object, the conversation it ended (in chat
form, as the agent wrote it: before any version's overlays) and its own input items, so a
continuation is served like any request whose history the agent had sent in full.

Stored responses are written through the capture spool (durable before the answer leaves,
committed off the request path) and kept in memory for a while, so a continuation that
follows at once never waits for the registry. Nothing raw is at rest: with a seal key the
gateway stores the conversation sealed (encrypted), so a continuation reads it back as the
agent wrote it; without one it stores it redacted by the tenant's policy, so a continuation
served from the registry (after this process forgot it) sees placeholders where redaction
found something. Stored responses expire with the tenant's retention (30 days without one,
as OpenAI keeps them) and are never read by evolution, which reads the events.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Any

from atdp import utcnow
from proxy import jsonio
from proxy.capture import CaptureRecord
from proxy.errors import GatewayError
from proxy.gateway import Gateway, Served
from registry import (
    NotFoundError,
    StoredResponse,
    delete_stored_response,
    get_stored_response,
)

__all__ = ["Conversation", "ResponseStore"]

DEFAULT_RETENTION = timedelta(days=30)

# The document of a stored response: {"response": the Responses object, "messages": the
# conversation in chat form, its answer included, "input_items": the request's own input}.
Conversation = dict[str, Any]


class ResponseStore:
    """Stored responses of one gateway: the recent in memory, all in the registry."""

    def __init__(self, gateway: Gateway, capacity: int = 10_000) -> None:
        self.gateway = gateway
        self.capacity = capacity
        self._recent: OrderedDict[str, tuple[StoredResponse, Conversation]] = OrderedDict()

    async def save(
        self,
        tenant: str,
        agent: str,
        served: Served,
        previous_id: str | None,
        conversation: Conversation,
    ) -> None:
        policy = await self.gateway.catalog.policy(tenant)
        now = utcnow()
        retention = (
            timedelta(days=policy.retention_days) if policy.retention_days else DEFAULT_RETENTION
        )
        key = self.gateway.config.seal_key
        redactor = self.gateway.redactor_for(policy)
        at_rest = conversation if key else redactor.redact_json(conversation)
        text = jsonio.dumps(at_rest).decode()
        record = StoredResponse(
            id=conversation["response"]["id"],
            tenant=tenant,
            agent=agent,
            session=served.session,
            trajectory_id=served.trajectory_id,
            event_id=served.event_id,
            previous_id=previous_id,
            document=_seal(text, key) if key else text,
            sealed=key is not None,
            created_at=now,
            expires_at=now + retention,
        )
        self._recent[record.id] = (record, conversation)
        while len(self._recent) > self.capacity:
            self._recent.popitem(last=False)
        self.gateway.writer.submit([CaptureRecord("stored_response", record)])

    async def load(self, tenant: str, response_id: str, *, param: str) -> tuple[str, Conversation]:
        """(the session, the conversation) of the tenant's response; 404 if there is none,
        it is another tenant's, deleted or expired."""
        recent = self._recent.get(response_id)
        if recent is not None:
            record, conversation = recent
            if record.tenant == tenant and not _expired(record.expires_at):
                return record.session, conversation
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
        return record.session, jsonio.loads(text)

    async def delete(self, tenant: str, response_id: str) -> None:
        """Delete the tenant's response (404 if it has none by that id)."""
        recent = self._recent.get(response_id)
        if recent is not None and recent[0].tenant == tenant:
            del self._recent[response_id]
        await asyncio.to_thread(self.gateway.writer.flush, 5.0)
        found = await self.gateway.catalog.run(delete_stored_response, tenant, response_id)
        if not found:
            raise _not_found(response_id, "response_id")


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
