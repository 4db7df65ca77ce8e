"""MCP servers: the upstream MCP servers an agent reaches through the gateway.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "mcp_server",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("agent", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(), nullable=True),
        sa.Column("command", JSON, nullable=True),
        sa.Column("tenants", JSON, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["agent"], ["agent.name"], name=op.f("fk_mcp_server_agent_agent")),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_mcp_server")),
    )
    op.create_index(op.f("ix_mcp_server_agent"), "mcp_server", ["agent"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_mcp_server_agent"), table_name="mcp_server")
    op.drop_table("mcp_server")
