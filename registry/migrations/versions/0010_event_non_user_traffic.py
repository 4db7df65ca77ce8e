"""A partial index of the events that are not user traffic (shadow, evaluation, replay).

Every window read keeps only the trajectories that hold no such event (`registry.windows`):
without this index, PostgreSQL answered that by scanning every event of the window's day
partitions once per statement. Such events are few, so the index is small.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

NAME = "ix_event_trajectory_non_user"
WHERE = sa.text("traffic <> 'user'")


def upgrade() -> None:
    # On PostgreSQL an index on the partitioned table is created on every partition too.
    op.create_index(
        NAME, "event", ["trajectory_id", "created_at"], postgresql_where=WHERE, sqlite_where=WHERE
    )


def downgrade() -> None:
    op.drop_index(NAME, table_name="event")
