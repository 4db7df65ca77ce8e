"""Stored responses are read from the llm_call that produced them; deletions are tombstones.

`event.response_id` (indexed with the tenant where it is set) names the Responses API
response an llm_call stored, as its `metadata.extra["stored_response"]` does; the
`stored_response` table gives way to `deleted_response`, the tombstones of deleted ones.

Existing rows are carried over: a deleted one becomes its tombstone; a live one marks its
llm_call (`event_id`) with its id, creation time, expiry and the response it continued, as
the gateway now records with every stored call. Events are immutable (a trigger refuses
UPDATE): this one backfill lifts the trigger within its own transaction and adds that
annotation and `response_id` only; nothing the event recorded changes. A response whose
llm_call is gone (or was never recorded) is dropped with the table: nothing could rebuild
it. A carried response the gateway had sealed for a tenant without `seal_raw` had no
sealed copy of its call, so a continuation now reads it redacted, as one without a seal
key always did. The downgrade restores the empty `stored_response` table, not the
responses.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

from registry.types import JSONDocument, UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_STORED = sa.table(
    "stored_response",
    sa.column("tenant", sa.String),
    sa.column("id", sa.String),
    sa.column("event_id", sa.Uuid),
    sa.column("previous_id", sa.String),
    sa.column("document", sa.String),
    sa.column("sealed", sa.Boolean),
    sa.column("created_at", UTCDateTime),
    sa.column("expires_at", UTCDateTime),
    sa.column("deleted_at", UTCDateTime),
)
_DELETED = sa.table(
    "deleted_response",
    sa.column("tenant", sa.String),
    sa.column("id", sa.String),
    sa.column("deleted_at", UTCDateTime),
    sa.column("expires_at", UTCDateTime),
)
_EVENT = sa.table(
    "event",
    sa.column("id", sa.Uuid),
    sa.column("response_id", sa.String),
    sa.column("body", JSONDocument),
)


def upgrade() -> None:
    op.add_column("event", sa.Column("response_id", sa.String(length=200), nullable=True))
    op.create_index(
        "ix_event_tenant_response_id",
        "event",
        ["tenant", "response_id"],
        unique=False,
        postgresql_where=sa.text("response_id IS NOT NULL"),
        sqlite_where=sa.text("response_id IS NOT NULL"),
    )
    op.create_table(
        "deleted_response",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_deleted_response_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("tenant", "id", name=op.f("pk_deleted_response")),
    )
    _carry_over(op.get_bind())
    op.drop_index(op.f("ix_stored_response_expires_at"), table_name="stored_response")
    op.drop_table("stored_response")


def _carry_over(connection: sa.Connection) -> None:
    with _events_writable(connection):
        tombstones = _mark_llm_calls(connection)
    if tombstones:
        connection.execute(sa.insert(_DELETED), tombstones)


@contextmanager
def _events_writable(connection: sa.Connection) -> Iterator[None]:
    """Lift the trigger that keeps event rows immutable (`0001`), and put it back."""
    if connection.dialect.name == "postgresql":
        op.execute("ALTER TABLE event DISABLE TRIGGER event_refuse_update")
        yield
        op.execute("ALTER TABLE event ENABLE TRIGGER event_refuse_update")
        return
    op.execute("DROP TRIGGER event_refuse_update")
    yield
    op.execute(
        "CREATE TRIGGER event_refuse_update BEFORE UPDATE ON event BEGIN "
        "SELECT RAISE(ABORT, 'event rows are immutable (UPDATE refused); "
        "append a new row instead'); END"
    )


def _mark_llm_calls(connection: sa.Connection) -> list[dict]:
    """Mark the llm_call of each live stored response; returns the deleted ones'
    tombstones."""
    tombstones = []
    for row in connection.execute(sa.select(_STORED)).mappings():
        if row["deleted_at"] is not None:
            tombstones.append({k: row[k] for k in ("tenant", "id", "deleted_at", "expires_at")})
            continue
        body = connection.execute(
            sa.select(_EVENT.c.body).where(_EVENT.c.id == row["event_id"])
        ).scalar()
        if body is None:
            continue
        body["metadata"].setdefault("extra", {})["stored_response"] = {
            "id": row["id"],
            "created_at": _created_at(row),
            "expires_at": row["expires_at"].isoformat() if row["expires_at"] else None,
            **({"previous_id": row["previous_id"]} if row["previous_id"] else {}),
        }
        connection.execute(
            sa.update(_EVENT)
            .where(_EVENT.c.id == row["event_id"])
            .values(body=body, response_id=row["id"])
        )
    return tombstones


def _created_at(row: sa.RowMapping) -> int:
    """The response's own creation time, as its document has it (the row's, if sealed)."""
    if not row["sealed"]:
        return int(json.loads(row["document"])["response"]["created_at"])
    return int(row["created_at"].timestamp())


def downgrade() -> None:
    op.create_table(
        "stored_response",
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=200), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=200), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=True),
        sa.Column("event_id", sa.Uuid(), nullable=True),
        sa.Column("previous_id", sa.String(length=200), nullable=True),
        sa.Column("document", sa.String(), nullable=False),
        sa.Column("sealed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_stored_response_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("tenant", "id", name=op.f("pk_stored_response")),
    )
    op.create_index(
        op.f("ix_stored_response_expires_at"), "stored_response", ["expires_at"], unique=False
    )
    op.drop_table("deleted_response")
    op.drop_index("ix_event_tenant_response_id", table_name="event")
    op.drop_column("event", "response_id")
