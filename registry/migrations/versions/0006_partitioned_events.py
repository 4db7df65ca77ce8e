"""Events and rewards partitioned by day on PostgreSQL; (trajectory_id, seq) indexed, not unique.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03

On PostgreSQL `event` and `reward` become range-partitioned by `created_at`: a partition
a day (`event_p20261203`) from the oldest row's day to a week ahead, and a default
partition for anything else (`registry.partitions` creates later days and drops expired
ones). The rows are copied into the new tables; on a large registry this takes a while and
holds the tables.

A unique constraint on a partitioned table must hold the partition key, so:
- the primary keys become (id, created_at) (an id is still unique: ids are random UUIDs
  and every write of a record carries its own created_at);
- (trajectory_id, seq) is an index, no longer unique, on both backends: the gateway keeps
  seq gapless by itself, and a constraint that dropped the second of two colliding
  events silently lost a record instead;
- reward.event_id no longer references event.id (a foreign key cannot point into a
  partitioned table without its partition key); `add_rewards` and the bulk writer check
  that a reward's event exists and belongs to its trajectory and tenant, as before.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)
AHEAD_DAYS = 7
OLDEST_DAY_PARTITION = 400  # days back; older rows go to the default partition


def _event_columns() -> list[sa.Column]:
    return [
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("parent_id", sa.Uuid(), nullable=True),
        sa.Column("traffic", sa.String(length=16), nullable=False),
        sa.Column("training", sa.String(length=16), nullable=False),
        sa.Column("replay_class", sa.String(length=16), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("expires_at", TIMESTAMP, nullable=True),
        sa.Column("body", JSON, nullable=False),
    ]


def _reward_columns() -> list[sa.Column]:
    return [
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("trajectory_id", sa.Uuid(), nullable=False),
        sa.Column("event_id", sa.Uuid(), nullable=True),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("value_kind", sa.String(length=16), nullable=False),
        sa.Column("value_num", sa.Float(), nullable=True),
        sa.Column("value_label", sa.String(), nullable=True),
        sa.Column("critique", sa.String(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
    ]


def _table(table: str, partitioned: bool) -> None:
    """`event` or `reward`, partitioned by day (this revision) or not (the one before)."""
    if table == "event":
        columns = _event_columns()
        before = sa.UniqueConstraint("trajectory_id", "seq", name="uq_event_trajectory_id_seq")
        indexes = {
            "ix_event_expires_at": ["expires_at"],
            "ix_event_tenant_created": ["tenant", "created_at"],
        }
        if partitioned:
            indexes["ix_event_trajectory_id_seq"] = ["trajectory_id", "seq"]
    else:
        columns = _reward_columns()
        before = sa.ForeignKeyConstraint(
            ["event_id"], ["event.id"], name="fk_reward_event_id_event"
        )
        indexes = {
            "ix_reward_event": ["event_id"],
            "ix_reward_tenant_trajectory": ["tenant", "trajectory_id"],
        }
    op.create_table(
        table,
        *columns,
        sa.ForeignKeyConstraint(["tenant"], ["tenant.name"], name=f"fk_{table}_tenant_tenant"),
        sa.ForeignKeyConstraint(
            ["trajectory_id"], ["trajectory.id"], name=f"fk_{table}_trajectory_id_trajectory"
        ),
        sa.PrimaryKeyConstraint(
            *(("id", "created_at") if partitioned else ("id",)), name=f"pk_{table}"
        ),
        *([] if partitioned else [before]),
        **({"postgresql_partition_by": "RANGE (created_at)"} if partitioned else {}),
    )
    for name, indexed in indexes.items():
        op.create_index(name, table, indexed)


def _set_aside(table: str) -> None:
    """Rename `table` out of the way and free its constraint, index and trigger names."""
    op.execute(f"DROP TRIGGER IF EXISTS {table}_refuse_update ON {table}")
    op.execute(f"ALTER TABLE {table} RENAME TO {table}_old")
    for name in (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(:t) "
                "ORDER BY contype = 'p'"  # the primary key last: the others may lean on it
            ),
            {"t": f"{table}_old"},
        )
        .scalars()
    ):
        op.execute(f'ALTER TABLE {table}_old DROP CONSTRAINT "{name}"')
    for name in (
        op.get_bind()
        .execute(
            sa.text(
                "SELECT indexname FROM pg_indexes "
                "WHERE tablename = :t AND schemaname = current_schema()"
            ),
            {"t": f"{table}_old"},
        )
        .scalars()
    ):
        op.execute(f'DROP INDEX "{name}"')


def _refuse_update(table: str) -> None:
    op.execute(
        f"CREATE TRIGGER {table}_refuse_update BEFORE UPDATE ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION evoplane_refuse_change()"
    )


def _columns(table: str) -> str:
    columns = _event_columns() if table == "event" else _reward_columns()
    return ", ".join(c.name for c in columns)


def _days(oldest: datetime | None) -> list[date]:
    today = datetime.now(UTC).date()
    first = (
        today
        if oldest is None
        else max(oldest.astimezone(UTC).date(), today - timedelta(days=OLDEST_DAY_PARTITION))
    )
    first = min(first, today)
    return [first + timedelta(days=n) for n in range((today - first).days + AHEAD_DAYS + 1)]


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("reward") as batch:
            batch.drop_constraint("fk_reward_event_id_event", type_="foreignkey")
        with op.batch_alter_table("event") as batch:
            batch.drop_constraint("uq_event_trajectory_id_seq", type_="unique")
            batch.create_index("ix_event_trajectory_id_seq", ["trajectory_id", "seq"])
        _sqlite_refuse_update()
        return
    bind = op.get_bind()
    oldest = bind.execute(
        sa.text(
            "SELECT least((SELECT min(created_at) FROM event), "
            "(SELECT min(created_at) FROM reward))"
        )
    ).scalar()
    _set_aside("reward")
    _set_aside("event")
    _table("event", partitioned=True)
    _table("reward", partitioned=True)
    for table in ("event", "reward"):
        op.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
        for day in _days(oldest):
            start = datetime.combine(day, time(), UTC)
            op.execute(
                f"CREATE TABLE {table}_p{day:%Y%m%d} PARTITION OF {table} FOR VALUES "
                f"FROM ('{start.isoformat()}') TO ('{(start + timedelta(days=1)).isoformat()}')"
            )
        op.execute(
            f"INSERT INTO {table} ({_columns(table)}) SELECT {_columns(table)} FROM {table}_old"
        )
    op.execute("DROP TABLE reward_old")
    op.execute("DROP TABLE event_old")
    _refuse_update("event")
    _refuse_update("reward")
    op.execute(_ADD_DAY)
    op.execute(_DROP_DAY)


# Partition changes run as the schema's owner (SECURITY DEFINER, on this schema's search
# path), so that gateways and `evoplane gc`, whose role may not change the schema, can add
# and drop days (registry/partitions.py) and nothing else.
_ADD_DAY = """
CREATE FUNCTION evoplane_add_day(parent text, day date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    name text := parent || '_p' || to_char(day, 'YYYYMMDD');
    low timestamptz := day::timestamp AT TIME ZONE 'UTC';
    high timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
    IF parent NOT IN ('event', 'reward') THEN
        RAISE EXCEPTION 'not a partitioned registry table: %', parent;
    END IF;
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    -- A day's rows may sit in the default partition (a clock far ahead, a late replay):
    -- move them into the new table, then attach it.
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                   name, parent);
    EXECUTE format('WITH moved AS (DELETE FROM %I WHERE created_at >= $1 AND created_at < $2 '
                   'RETURNING *) INSERT INTO %I SELECT * FROM moved', parent || '_default', name)
        USING low, high;
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
                   parent, name, low, high);
    RETURN true;
END $$
"""
_DROP_DAY = """
CREATE FUNCTION evoplane_drop_day(parent text, day date) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    name text := parent || '_p' || to_char(day, 'YYYYMMDD');
BEGIN
    IF parent NOT IN ('event', 'reward') THEN
        RAISE EXCEPTION 'not a partitioned registry table: %', parent;
    END IF;
    IF to_regclass(name) IS NOT NULL THEN
        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', parent, name);
        EXECUTE format('DROP TABLE %I', name);
    END IF;
END $$
"""


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        with op.batch_alter_table("event") as batch:
            batch.drop_index("ix_event_trajectory_id_seq")
            batch.create_unique_constraint("uq_event_trajectory_id_seq", ["trajectory_id", "seq"])
        with op.batch_alter_table("reward") as batch:
            batch.create_foreign_key("fk_reward_event_id_event", "event", ["event_id"], ["id"])
        _sqlite_refuse_update()
        return
    op.execute("DROP FUNCTION IF EXISTS evoplane_add_day(text, date)")
    op.execute("DROP FUNCTION IF EXISTS evoplane_drop_day(text, date)")
    _set_aside("reward")
    _set_aside("event")
    _table("event", partitioned=False)
    _table("reward", partitioned=False)
    for table in ("event", "reward"):
        op.execute(
            f"INSERT INTO {table} ({_columns(table)}) SELECT {_columns(table)} FROM {table}_old"
        )
    op.execute("DROP TABLE reward_old CASCADE")  # its partitions with it
    op.execute("DROP TABLE event_old CASCADE")
    _refuse_update("event")
    _refuse_update("reward")


def _sqlite_refuse_update() -> None:
    """SQLite's batch mode rebuilds a table without its triggers: put them back."""
    for table in ("event", "reward"):
        op.execute(f"DROP TRIGGER IF EXISTS {table}_refuse_update")
        op.execute(
            f"CREATE TRIGGER {table}_refuse_update BEFORE UPDATE ON {table} BEGIN "
            f"SELECT RAISE(ABORT, '{table} rows are immutable (UPDATE refused); "
            "append a new row instead'); END"
        )
