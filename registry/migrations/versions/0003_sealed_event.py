"""Sealed raw copies of redacted events (encrypted; readable only by permitted jobs).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sealed_event",
        sa.Column("event_id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("ciphertext", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_sealed_event_tenant_tenant")
        ),
        sa.PrimaryKeyConstraint("event_id", name=op.f("pk_sealed_event")),
    )


def downgrade() -> None:
    op.drop_table("sealed_event")
