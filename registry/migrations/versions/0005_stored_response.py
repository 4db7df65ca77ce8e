"""Stored Responses API responses (per tenant, expiring like events; deletion leaves a tombstone).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
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
        # (tenant, id): every read is one tenant's, so the key is also its index.
        sa.PrimaryKeyConstraint("tenant", "id", name=op.f("pk_stored_response")),
    )
    op.create_index(
        op.f("ix_stored_response_expires_at"), "stored_response", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_stored_response_expires_at"), table_name="stored_response")
    op.drop_table("stored_response")
