"""Stored responses: what `previous_response_id` and `GET /v1/responses/{id}` read back.

The gateway stores the Responses API responses it serves (unless a request says
`store: false`) through its capture spool, off the request path. The document is the
gateway's own (JSON, or ciphertext when sealed); the registry keeps it per tenant and lets
it expire like the tenant's events (`expires_at`, enforced on read and by `purge_expired`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from pydantic import BaseModel, Field, field_validator
from sqlmodel import Session, select

from atdp import utcnow
from registry.errors import NotFoundError
from registry.scope import scoped
from registry.tables import StoredResponseRow
from registry.trajectories import _insert_ignoring_duplicates

__all__ = [
    "StoredResponse",
    "delete_stored_response",
    "get_stored_response",
    "store_responses",
]


class StoredResponse(BaseModel):
    id: str = Field(min_length=1, max_length=200)  # "resp_<hex>", the Responses API id
    tenant: str
    agent: str
    session: str
    trajectory_id: uuid.UUID | None
    event_id: uuid.UUID | None  # the llm_call that produced it
    previous_id: str | None = Field(max_length=200)  # the previous_response_id it continued
    document: str  # the gateway owns its shape
    sealed: bool = False  # the document is encrypted with the gateway's seal key
    created_at: datetime
    expires_at: datetime | None  # from the tenant's retention; None: kept until deleted

    @field_validator("id", "previous_id", "document")
    @classmethod
    def _no_nul(cls, text: str | None) -> str | None:
        # PostgreSQL text cannot hold NUL; refusing it here keeps both backends alike.
        if text is not None and "\x00" in text:
            raise ValueError("a stored response's ids and document cannot contain NUL characters")
        return text


def store_responses(session: Session, responses: Sequence[StoredResponse]) -> int:
    """Store responses; one already stored (same tenant and id), or deleted, is skipped.

    Returns:
        how many rows were written.
    """
    rows = [r.model_dump() for r in responses]
    return _insert_ignoring_duplicates(session, StoredResponseRow.__table__, rows)


def get_stored_response(
    session: Session, tenant: str, response_id: str, *, now: datetime | None = None
) -> StoredResponse:
    """The tenant's response `response_id`, unless deleted or expired at `now`."""
    row = _live(session, tenant, response_id, now or utcnow())
    if row is None:
        raise NotFoundError("response", response_id)
    return StoredResponse.model_validate(row, from_attributes=True)


def delete_stored_response(session: Session, tenant: str, response_id: str) -> bool:
    """Delete the tenant's response; False if it had none (or only an expired one).

    The row stays as a tombstone without its document, so a replay of the capture spool
    that stored it cannot bring it back.
    """
    now = utcnow()
    row = _live(session, tenant, response_id, now)
    if row is None:
        return False
    row.document, row.deleted_at = "", now
    session.add(row)
    session.flush()
    return True


def _live(
    session: Session, tenant: str, response_id: str, now: datetime
) -> StoredResponseRow | None:
    statement = scoped(
        select(StoredResponseRow).where(
            StoredResponseRow.id == response_id,
            StoredResponseRow.deleted_at.is_(None),
            sa.or_(StoredResponseRow.expires_at.is_(None), StoredResponseRow.expires_at > now),
        ),
        StoredResponseRow.tenant,
        tenant,
    )
    return session.exec(statement).first()
