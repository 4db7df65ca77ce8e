"""Session routes: the version and replica each session keeps for its life.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "session_route",
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("session", sa.String(length=200), nullable=False),
        sa.Column("version_id", sa.String(length=80), nullable=False),
        sa.Column("alias", sa.String(length=16), nullable=False),
        sa.Column("replica", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["agent"], ["agent.name"], name=op.f("fk_session_route_agent_agent")
        ),
        sa.ForeignKeyConstraint(
            ["tenant"], ["tenant.name"], name=op.f("fk_session_route_tenant_tenant")
        ),
        sa.ForeignKeyConstraint(
            ["version_id"],
            ["agent_version.id"],
            name=op.f("fk_session_route_version_id_agent_version"),
        ),
        sa.PrimaryKeyConstraint("agent", "tenant", "session", name=op.f("pk_session_route")),
    )


def downgrade() -> None:
    op.drop_table("session_route")
