"""Sealed raw copies: the unredacted event, encrypted, for training jobs a tenant permits.

Redaction protects everything stored in the clear; some tenants still want their raw data
usable for training. The gateway then seals the raw event with a key that only the
gateway and permitted training jobs hold (Fernet: AES-128-CBC with HMAC-SHA256), and the
redacted event points at it (`governance.sealed_ref`). Reading it back needs the key, and
the reader must be named in the tenant's policy.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel
from sqlmodel import Session, select

from atdp import Event
from registry.errors import NotFoundError
from registry.scope import scoped
from registry.tables import SealedEventRow
from registry.tenants import get_tenant
from registry.trajectories import _insert_ignoring_duplicates

__all__ = ["SealedAccessError", "SealedEvent", "seal_event", "store_sealed", "unseal_event"]


class SealedEvent(BaseModel):
    event_id: uuid.UUID
    tenant: str
    ciphertext: str
    created_at: datetime


class SealedAccessError(PermissionError):
    """The reader is not one the tenant's policy permits, or the key is wrong."""


def _fernet(key: str):
    from cryptography.fernet import Fernet

    try:
        return Fernet(key.encode() if isinstance(key, str) else key)
    except ValueError as error:
        raise ValueError(
            "the seal key must be 32 url-safe base64-encoded bytes; make one with "
            "`evoplane key seal-key`"
        ) from error


def seal_event(event: Event, key: str, at: datetime) -> SealedEvent:
    """Encrypt the raw event (call before redaction)."""
    token = _fernet(key).encrypt(event.model_dump_json().encode())
    return SealedEvent(
        event_id=event.id, tenant=event.metadata.tenant, ciphertext=token.decode(), created_at=at
    )


def store_sealed(session: Session, sealed: Sequence[SealedEvent]) -> int:
    """Store sealed copies; one already stored (same event) is skipped."""
    rows = [s.model_dump() for s in sealed]
    return _insert_ignoring_duplicates(session, SealedEventRow.__table__, rows, key="event_id")


def unseal_event(
    session: Session, tenant: str, event_id: uuid.UUID, *, key: str, reader: str
) -> Event:
    """The raw event, for a reader the tenant permits."""
    if reader not in get_tenant(session, tenant).policy.sealed_readers:
        raise SealedAccessError(f"{reader!r} may not read tenant {tenant}'s sealed data")
    statement = scoped(
        select(SealedEventRow).where(SealedEventRow.event_id == event_id),
        SealedEventRow.tenant,
        tenant,
    )
    row = session.exec(statement).first()
    if row is None:
        raise NotFoundError("sealed event", event_id)
    from cryptography.fernet import InvalidToken

    try:
        raw = _fernet(key).decrypt(row.ciphertext.encode())
    except InvalidToken:
        raise SealedAccessError("the seal key does not open this copy") from None
    return Event.model_validate_json(raw)
