"""At most one unfinished evolution per agent.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ux_evolution_agent_running",
        "evolution",
        ["agent"],
        unique=True,
        postgresql_where=sa.text("outcome IS NULL"),
        sqlite_where=sa.text("outcome IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ux_evolution_agent_running", table_name="evolution")
