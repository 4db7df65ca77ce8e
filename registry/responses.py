"""Stored responses: what `previous_response_id` and `GET /v1/responses/{id}` read back.

A Responses API response the gateway stores (unless the request says `store: false`) has
no row of its own: the llm_call that produced it records the request and the answer, and
names the response in `metadata.extra["stored_response"]` ({"id", "created_at",
"expires_at", ...}), which `event.response_id` indexes. The gateway rebuilds the response
from that event (`proxy.protocols.recorded`). A stored response expires with the tenant's
retention as of its call (`expires_at`, enforced on read), or sooner with the event; a
deleted one leaves a tombstone (`deleted_response`) until it would have expired, so a
replayed capture spool cannot bring it back.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import utcnow
from registry.bodies import STORED, documents
from registry.errors import NotFoundError
from registry.scope import scoped
from registry.tables import DeletedResponseRow, EventRow, SealedEventRow

__all__ = ["RecordedResponse", "delete_stored_response", "get_stored_response"]


class RecordedResponse(BaseModel):
    """A stored response as the registry holds it: the llm_call that produced it."""

    event_id: uuid.UUID
    # The llm_call's document as stored (redacted where it held anything), without the
    # messages sent upstream: the response is rebuilt from the agent's own request, which
    # holds only its turn when it continued a stored response.
    event: dict[str, Any]
    sealed: str | None  # its raw copy, encrypted with the gateway's seal key, if it was sealed
    expires_at: datetime | None


def get_stored_response(
    session: Session, tenant: str, response_id: str, *, now: datetime | None = None
) -> RecordedResponse:
    """The tenant's response `response_id`, unless deleted or expired at `now`."""
    found = _live(session, tenant, response_id, now or utcnow())
    if found is None:
        raise NotFoundError("response", response_id)
    event_id, event, expires_at = found
    sealed = (
        session.get(SealedEventRow, event_id) if event["governance"].get("sealed_ref") else None
    )
    return RecordedResponse(
        event_id=event_id,
        event=event,
        sealed=sealed.ciphertext if sealed is not None else None,
        expires_at=expires_at,
    )


def delete_stored_response(session: Session, tenant: str, response_id: str) -> bool:
    """Delete the tenant's response; False if it had none (or only an expired one).

    Its llm_call stays, as the trajectory's; a tombstone hides the response from then on.
    """
    now = utcnow()
    found = _live(session, tenant, response_id, now)
    if found is None:
        return False
    session.add(
        DeletedResponseRow(tenant=tenant, id=response_id, deleted_at=now, expires_at=found[2])
    )
    session.flush()
    return True


def _live(
    session: Session, tenant: str, response_id: str, now: datetime
) -> tuple[uuid.UUID, dict[str, Any], datetime | None] | None:
    """(its id, what rebuilding the response reads of it, the expiry) of the llm_call of a
    response neither deleted nor expired at `now`."""
    deleted = select(DeletedResponseRow.id).where(
        DeletedResponseRow.tenant == tenant, DeletedResponseRow.id == response_id
    )
    statement = scoped(
        select(*STORED).where(EventRow.response_id == response_id, ~sa.exists(deleted)),
        EventRow.tenant,
        tenant,
    )
    row = session.execute(statement.limit(1)).first()
    if row is None:
        return None
    document = documents(session, [row])[0]
    # What `proxy.protocols.recorded` reads of the llm_call.
    event = {name: document[name] for name in ("metadata", "action", "governance")}
    observation = document["observation"] or {}
    event["observation"] = {"data": observation.get("data"), "tools": observation.get("tools")}
    expires_at = _expiry(event["metadata"]["extra"]["stored_response"])
    if expires_at is not None and expires_at <= now:
        return None
    return row.id, event, expires_at


def _expiry(stored: dict[str, Any]) -> datetime | None:
    written = stored.get("expires_at")
    return datetime.fromisoformat(written) if isinstance(written, str) else None
