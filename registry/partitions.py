"""Time partitions of the event and reward tables (PostgreSQL; SQLite has none).

On PostgreSQL `event` and `reward` are partitioned by `created_at` (native declarative
range partitioning), one partition a day (`event_p20261203`), plus a default partition
for anything outside them (a spool replayed long after it was written, a clock far off).
Partitions are created ahead: by `ensure_partitions`, which the capture drain calls when
a batch reaches past the days it has made sure of and `evoplane data partitions` runs as a
maintenance task, and by the migration that introduced them.

Retention drops a whole day (`drop_expired_partitions`) when every event in it is past
its `expires_at`: a tenant whose policy keeps events forever (or longer than the others)
keeps the day, and the row-by-row purge deletes what expired in it. Dropping a day also
deletes the rewards given to its events; a reward partition is dropped once it is past
and empty.

Window reads bound `created_at` from below (`registry.windows`), so the planner skips the
days before a window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

__all__ = [
    "AHEAD_DAYS",
    "PARTITIONED",
    "Partition",
    "compared_by_autogenerate",
    "drop_expired_partitions",
    "ensure_partitions",
    "is_partition_table",
    "partition_name",
    "partitions",
]

PARTITIONED = ("event", "reward")
AHEAD_DAYS = 7  # days created ahead of today
_NAME = re.compile(r"^(event|reward)_p(\d{8})$")
_ANY = re.compile(r"^(event|reward)_(p\d{8}|default)$")
_LOCK = 0x45564F50  # "EVOP": one process at a time creates or drops partitions


@dataclass(frozen=True)
class Partition:
    table: str  # "event" or "reward"
    name: str  # "event_p20261203"
    day: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.day, time(), UTC)

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=1)


def is_partition_table(name: str | None) -> bool:
    """Whether `name` is one of the partitions (which the table definitions leave out)."""
    return bool(name and _ANY.match(name))


def compared_by_autogenerate(name: str | None, kind: str, parent_names: dict) -> bool:
    """Alembic's `include_name`: the partitioned parents are compared with the table
    definitions, their day partitions are not."""
    if kind == "table":
        return not is_partition_table(name)
    return not is_partition_table(parent_names.get("table_name"))


def partition_name(table: str, day: date) -> str:
    return f"{table}_p{day:%Y%m%d}"


def is_partitioned(connection: Connection) -> bool:
    """Whether this database partitions events (PostgreSQL, after migration 0006)."""
    if connection.dialect.name != "postgresql":
        return False
    kind = connection.execute(
        sa.text("SELECT relkind FROM pg_class WHERE oid = to_regclass('event')")
    ).scalar()
    return kind == "p"


def partitions(connection: Connection, table: str) -> list[Partition]:
    """`table`'s day partitions, oldest first (not the default one)."""
    names = connection.execute(
        sa.text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(:table)"
        ),
        {"table": table},
    ).scalars()
    found = []
    for name in names:
        match = _NAME.match(name)
        if match and match.group(1) == table:
            found.append(Partition(table, name, datetime.strptime(match.group(2), "%Y%m%d").date()))
    return sorted(found, key=lambda p: p.day)


def ensure_partitions(
    engine_or_connection: Engine | Connection,
    around: datetime,
    *,
    ahead: int = AHEAD_DAYS,
    since: date | None = None,
) -> list[str]:
    """Make sure `event` and `reward` have a partition for every day from `since` (default:
    the day of `around`) to `ahead` days after it; a no-op where they are not partitioned.

    Rows of such a day already in the default partition move into the new one.

    Returns:
        the partitions created.
    """
    if isinstance(engine_or_connection, Engine):
        with engine_or_connection.begin() as connection:
            return ensure_partitions(connection, around, ahead=ahead, since=since)
    connection = engine_or_connection
    if not is_partitioned(connection):
        return []
    connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
    first = since or around.astimezone(UTC).date()
    last = around.astimezone(UTC).date() + timedelta(days=ahead)
    created = []
    for table in PARTITIONED:
        existing = {p.day for p in partitions(connection, table)}
        day = first
        while day <= last:
            if day not in existing:
                _create(connection, Partition(table, partition_name(table, day), day))
                created.append(partition_name(table, day))
            day += timedelta(days=1)
    return created


def _create(connection: Connection, partition: Partition) -> None:
    # In the database (migration 0006), as the schema's owner: the gateways' role may not
    # change the schema. Rows of the day already in the default partition move into it.
    connection.execute(
        sa.text("SELECT evoplane_add_day(:table, :day)"),
        {"table": partition.table, "day": partition.day},
    )


def drop_expired_partitions(connection: Connection, now: datetime) -> dict[str, int]:
    """Drop each event day whose every event is past its `expires_at` at `now` (with the
    rewards given to its events, and the trajectories it leaves without events, with
    theirs), then each past reward day left empty; a no-op where events are not
    partitioned.

    Returns:
        {"partitions", "events", "rewards", "trajectories"}: what went.
    """
    counts = {"partitions": 0, "events": 0, "rewards": 0, "trajectories": 0}
    if not is_partitioned(connection):
        return counts
    connection.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
    touched = "_evoplane_touched_trajectory"
    connection.execute(
        sa.text(f"CREATE TEMP TABLE IF NOT EXISTS {touched} (id uuid) ON COMMIT DROP")
    )
    # Each day is read through its parent with the day's bounds, which the planner prunes
    # to that one partition: the gateways' role may read the parent, not the partitions.
    day = "created_at >= :start AND created_at < :end"
    for partition in partitions(connection, "event"):
        if partition.end > now:
            break  # the days are in order: none after this is wholly past
        bounds = {"start": partition.start, "end": partition.end, "now": now}
        # Cheap on the expires_at index: any row still kept (no expiry, or not yet due).
        kept = connection.execute(
            sa.text(
                f"SELECT EXISTS (SELECT 1 FROM event WHERE {day} "
                "AND (expires_at IS NULL OR expires_at > :now))"
            ),
            bounds,
        ).scalar()
        if kept:
            continue
        connection.execute(
            sa.text(f"INSERT INTO {touched} SELECT DISTINCT trajectory_id FROM event WHERE {day}"),
            bounds,
        )
        counts["rewards"] += connection.execute(
            sa.text(f"DELETE FROM reward WHERE event_id IN (SELECT id FROM event WHERE {day})"),
            bounds,
        ).rowcount
        counts["events"] += connection.execute(
            sa.text(f"SELECT count(*) FROM event WHERE {day}"), bounds
        ).scalar()
        _drop(connection, partition)
        counts["partitions"] += 1
    emptied = (
        f"SELECT DISTINCT t.id FROM {touched} t "
        "WHERE NOT EXISTS (SELECT 1 FROM event e WHERE e.trajectory_id = t.id)"
    )
    counts["rewards"] += connection.execute(
        sa.text(f"DELETE FROM reward WHERE trajectory_id IN ({emptied})")
    ).rowcount
    counts["trajectories"] = connection.execute(
        sa.text(f"DELETE FROM trajectory WHERE id IN ({emptied})")
    ).rowcount
    connection.execute(sa.text(f"TRUNCATE {touched}"))
    for partition in partitions(connection, "reward"):
        if partition.end > now:
            break
        bounds = {"start": partition.start, "end": partition.end}
        if not connection.execute(
            sa.text(f"SELECT EXISTS (SELECT 1 FROM reward WHERE {day})"), bounds
        ).scalar():
            _drop(connection, partition)
            counts["partitions"] += 1
    return counts


def _drop(connection: Connection, partition: Partition) -> None:
    connection.execute(
        sa.text("SELECT evoplane_drop_day(:table, :day)"),
        {"table": partition.table, "day": partition.day},
    )
