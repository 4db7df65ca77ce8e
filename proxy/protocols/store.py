"""The Responses API's stored responses: what `previous_response_id` continues.

A stored response is its request's own input items and the response object, and names the
response it continued: the conversation a continuation shows the model is the chain's
inputs and answers, oldest first, in chat form as the agent wrote them (before any
version's overlays), so it is served like a request whose history the agent had sent in
full. Each response keeps only its own turn, so a long conversation costs no more per turn
than a short one.

A stored response has no row of its own: it is rebuilt from the llm_call that produced it
(`proxy.protocols.recorded`), which records its id and times, and is kept in memory for a
while, so a continuation that follows at once never waits for the registry. So nothing raw
is at rest, as for every event: when redaction found something in the call, a gateway
with a seal key seals the call's raw events (whatever the tenant's `seal_raw`), so a
continuation reads it back as the agent wrote it; without one, a continuation served from
the registry (after this process forgot it) sees placeholders there. Stored responses
expire with the tenant's retention (30 days without one, as OpenAI keeps them); a deleted
one leaves a tombstone (`registry.responses`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from atdp import utcnow
from proxy import jsonio
from proxy.errors import GatewayError
from proxy.protocols.recorded import stored_document, stored_response_of
from proxy.protocols.responses import ResponseContext, assistant_message, chat_messages
from proxy.service import GatewayService
from registry import NotFoundError, delete_stored_response, get_stored_response

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

    def __init__(self, service: GatewayService, capacity: int = 10_000) -> None:
        self.service = service
        self.capacity = capacity
        self._recent: OrderedDict[str, StoredTurn] = OrderedDict()

    async def recorded(
        self, tenant: str, context: ResponseContext, *, streamed: bool
    ) -> dict[str, Any]:
        """What the call's llm_call records of the response it stores (`metadata.extra`):
        its id, creation time, expiry by the tenant's retention, the response it continued
        (the request's copy of that id may be redacted at rest), and whether it streams."""
        policy = await self.service.catalog.policy(tenant)
        days = policy.retention_days
        retention = timedelta(days=days) if days else DEFAULT_RETENTION
        expires = (datetime.fromtimestamp(context.created_at, UTC) + retention).isoformat()
        record = {"id": context.id, "created_at": context.created_at, "expires_at": expires}
        if context.request.get("previous_response_id") is not None:
            record["previous_id"] = context.request["previous_response_id"]
        return {**record, "stream": True} if streamed else record

    def keep(
        self,
        tenant: str,
        session: str,
        recorded: dict[str, Any],
        response: bytes,
        listed_input: list[dict[str, Any]],
    ) -> None:
        """Keep a response just served in memory, for a continuation that follows at once:
        `response` is the Responses object's JSON as it was sent (not serialised again),
        `listed_input` the request's input items as the API lists them."""
        expires_at = datetime.fromisoformat(recorded["expires_at"])
        previous_id = recorded.get("previous_id")
        text = b'{"response":%b,"input":%b}' % (response, jsonio.dumps(listed_input))
        turn = StoredTurn(tenant, session, previous_id, expires_at, text)
        self._recent[recorded["id"]] = turn
        while len(self._recent) > self.capacity:
            self._recent.popitem(last=False)

    async def turn(self, tenant: str, response_id: str, *, param: str) -> StoredTurn:
        """The tenant's response; 404 if there is none, it is another tenant's, deleted
        or expired."""
        kept = self._recent.get(response_id)
        if kept is not None and kept.tenant == tenant and not _expired(kept.expires_at):
            return kept
        await self.service.recorder.flush()
        try:
            found = await self.service.catalog.run(get_stored_response, tenant, response_id)
        except NotFoundError:
            raise _not_found(response_id, param) from None
        event = found.event
        key = self.service.config.seal_key
        if found.sealed is not None and key:
            event = jsonio.loads(_unseal(found.sealed, key, response_id))
        previous_id = stored_response_of(event).get("previous_id")
        document = jsonio.dumps(stored_document(event))
        session = event["metadata"]["session"]
        return StoredTurn(tenant, session, previous_id, found.expires_at, document)

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
        await self.service.recorder.flush()
        found = await self.service.catalog.run(delete_stored_response, tenant, response_id)
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


def _unseal(token: str, key: str, response_id: str) -> bytes:
    """The raw llm_call of a response its gateway sealed."""
    from cryptography.fernet import Fernet, InvalidToken

    try:
        return Fernet(key.encode()).decrypt(token.encode())
    except InvalidToken:
        raise GatewayError(
            500,
            f"Response {response_id!r} was sealed with another key than this gateway's.",
            code="server_error",
        ) from None
