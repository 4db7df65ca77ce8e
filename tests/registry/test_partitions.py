"""Day partitions of events and rewards on PostgreSQL: created ahead, rows moved out of the
default partition, whole expired days dropped by retention, windows reading only their days.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from atdp import EventKind, Governance, utcnow
from registry import (
    ALL_TENANTS,
    TrajectoryWindow,
    add_rewards,
    create_db_engine,
    ensure_partitions,
    get_events,
    insert_events,
    list_rewards,
    list_trajectories,
    purge_expired,
    record_trajectory,
    transaction,
    upgrade,
)
from registry.partitions import AHEAD_DAYS, partition_name, partitions
from registry.windows import _window_events
from tests.conftest import postgres_schema_url
from tests.registry.helpers import event, reward, seed_world, trajectory


@pytest.fixture
def pg(postgres_schema):
    engine = create_db_engine(postgres_schema_url(postgres_schema))
    upgrade(engine)
    yield engine
    engine.dispose()


def _home(engine, table: str, row_id) -> str:
    """The partition a row is stored in."""
    with engine.connect() as connection:
        return connection.execute(
            sa.text(f"SELECT tableoid::regclass::text FROM {table} WHERE id = :id"), {"id": row_id}
        ).scalar_one()


def _days_ago(days: int) -> datetime:
    return utcnow() - timedelta(days=days)


def _record(engine, trajectories, events, rewards=()) -> None:
    with transaction(engine) as session:
        for t in trajectories:
            record_trajectory(session, t)
        insert_events(session, events)
        if rewards:
            add_rewards(session, list(rewards))


def test_the_migration_partitions_by_day_a_week_ahead(pg) -> None:
    today = utcnow().date()
    with pg.connect() as connection:
        for table in ("event", "reward"):
            days = [p.day for p in partitions(connection, table)]
            assert days == [today + timedelta(days=n) for n in range(AHEAD_DAYS + 1)]
    seed_world(pg)
    t = trajectory("acme")
    e = event(t, 0)
    _record(pg, [t], [e], [reward(t, 1.0, e)])
    assert _home(pg, "event", e.id) == partition_name("event", today)


def test_the_migration_carries_existing_rows_into_their_days(postgres_schema) -> None:
    engine = create_db_engine(postgres_schema_url(postgres_schema))
    upgrade(engine, "0005")
    seed_world(engine)
    old, recent = trajectory("acme", at=_days_ago(3)), trajectory("globex")
    events = [event(old, 0, created_at=_days_ago(3)), event(old, 1, created_at=_days_ago(2))]
    events.append(event(recent, 0))
    _record(engine, [old, recent], [])
    _insert_events_as_of_0005(engine, events)
    _record(engine, [], [], [reward(old, 1.0, events[1])])
    upgrade(engine)
    with transaction(engine) as session:
        assert [e.id for e in get_events(session, "acme", old.id)] == [e.id for e in events[:2]]
        assert len(list_rewards(session, "acme", trajectory_id=old.id)) == 1
    for e in events:
        assert _home(engine, "event", e.id) == partition_name("event", e.created_at.date())
    engine.dispose()


def _insert_events_as_of_0005(engine, events) -> None:
    """Events as the code of revision 0005 wrote them (the table's columns then)."""
    table = sa.Table("event", sa.MetaData(), autoload_with=engine)
    rows = [
        {
            "id": e.id,
            "trajectory_id": e.trajectory_id,
            "tenant": e.metadata.tenant,
            "seq": e.seq,
            "kind": e.kind.value,
            "parent_id": e.parent_id,
            "traffic": e.metadata.traffic.value,
            "training": e.governance.training.value,
            "replay_class": e.replay.replay_class.value,
            "created_at": e.created_at,
            "expires_at": e.governance.expires_at,
            "body": e.model_dump(mode="json"),
        }
        for e in events
    ]
    with engine.begin() as connection:
        connection.execute(sa.insert(table), rows)


def test_a_day_created_later_takes_its_rows_out_of_the_default_partition(pg) -> None:
    seed_world(pg)
    later = utcnow() + timedelta(days=AHEAD_DAYS + 3)
    t = trajectory("acme")
    e = event(t, 0, created_at=later)  # a clock far ahead: no day for it yet
    _record(pg, [t], [e])
    assert _home(pg, "event", e.id) == "event_default"

    created = ensure_partitions(pg, later, ahead=0)
    assert created == [
        partition_name("event", later.date()),
        partition_name("reward", later.date()),
    ]
    assert _home(pg, "event", e.id) == partition_name("event", later.date())
    assert ensure_partitions(pg, later, ahead=0) == []  # idempotent
    with pytest.raises(sa.exc.DBAPIError, match="immutable"):  # triggers came with the day
        with pg.begin() as connection:
            connection.execute(sa.text("UPDATE event SET seq = 5"))


def test_retention_drops_wholly_expired_days_and_deletes_rows_elsewhere(pg) -> None:
    seed_world(pg)
    now = utcnow()
    ensure_partitions(pg, now, since=(now - timedelta(days=12)).date())
    expired = Governance(expires_at=now - timedelta(days=1))
    forever = Governance(expires_at=None)
    gone = trajectory("acme", at=_days_ago(10))  # its day holds only expired events
    mixed = trajectory("globex", at=_days_ago(9))  # its day keeps one event forever
    kept = trajectory("globex", at=_days_ago(9))
    gone_events = [event(gone, n, created_at=_days_ago(10), governance=expired) for n in range(3)]
    mixed_events = [
        event(mixed, 0, created_at=_days_ago(9), governance=expired),
        event(kept, 0, created_at=_days_ago(9), governance=forever),
    ]
    _record(
        pg,
        [gone, mixed, kept],
        gone_events + mixed_events,
        [reward(gone, 1.0, gone_events[0]), reward(gone, 0.0), reward(kept, 1.0)],
    )
    mixed_day = mixed_events[0].created_at.date()

    with transaction(pg) as session:
        counts = purge_expired(session, now)
    assert {name: counts[name] for name in ("events", "rewards", "trajectories")} == {
        "events": 4,  # gone's three with their day, mixed's one row by row
        "rewards": 2,  # the one on gone's event, and gone's own
        "trajectories": 2,  # gone and mixed, left without events
    }
    ahead = [now.date() + timedelta(days=n) for n in range(AHEAD_DAYS + 1)]
    with pg.connect() as connection:
        # Past days went whole, but for the one that keeps an event forever; past reward
        # days were empty (the rewards were given today).
        assert [p.day for p in partitions(connection, "event")] == [mixed_day, *ahead]
        assert [p.day for p in partitions(connection, "reward")] == ahead
    assert counts["partitions"] == 2 * 12 - 1
    with transaction(pg) as session:
        assert {t.id for t in list_trajectories(session, ALL_TENANTS)} == {kept.id}
        assert [r.value.value for r in list_rewards(session, "globex", trajectory_id=kept.id)] == [
            1.0
        ]
    assert _home(pg, "event", mixed_events[1].id) == partition_name("event", mixed_day)


def test_window_reads_skip_the_days_before_the_window(pg) -> None:
    seed_world(pg)
    now = utcnow()
    ensure_partitions(pg, now, since=(now - timedelta(days=6)).date())
    old = trajectory("acme", at=_days_ago(5))
    new = trajectory("acme", at=_days_ago(1))
    _record(
        pg,
        [old, new],
        [event(old, 0, created_at=_days_ago(5)), event(new, 0, created_at=_days_ago(1))],
    )
    with pg.begin() as connection:
        connection.execute(sa.text("ANALYZE event"))
    since = datetime.combine(_days_ago(2).date(), datetime.min.time(), UTC)
    window = TrajectoryWindow(agent="support-bot", since=since)
    statement = _window_events(window, EventKind.LLM_CALL, sa.literal_column("event.id"))
    compiled = statement.compile(pg, compile_kwargs={"literal_binds": True})
    with pg.connect() as connection:
        plan = connection.execute(sa.text(f"EXPLAIN (FORMAT JSON) {compiled}")).scalar_one()
    scanned = {
        node["Relation Name"]
        for node in _nodes(plan if isinstance(plan, list) else json.loads(plan))
        if "Relation Name" in node
    }
    event_days = {name for name in scanned if name.startswith("event_")}
    assert partition_name("event", _days_ago(1).date()) in event_days
    assert partition_name("event", _days_ago(5).date()) not in event_days
    assert all(
        name == "event_default"
        or name >= partition_name("event", (since - timedelta(hours=1)).date())
        for name in event_days
    ), event_days


def test_window_reads_find_the_non_user_events_by_their_index(pg) -> None:
    """Leaving out trajectories with shadow or evaluation events must not scan the
    window's events: on a day of 20,000 user events the planner reads the partial index."""
    seed_world(pg)
    now = utcnow()
    t = trajectory("acme", at=_days_ago(0))
    _record(pg, [t], [event(t, 0, created_at=now)])
    with pg.begin() as connection:
        connection.execute(
            sa.text(
                "INSERT INTO event (id, trajectory_id, tenant, seq, kind, parent_id, traffic,"
                " training, replay_class, created_at, body)"
                " SELECT gen_random_uuid(), trajectory_id, tenant, seq + n, kind, parent_id,"
                " CASE WHEN n % 1000 = 0 THEN 'shadow' ELSE traffic END, training,"
                " replay_class, created_at, body FROM event, generate_series(1, 20000) n"
            )
        )
        connection.execute(sa.text("ANALYZE event"))
    window = TrajectoryWindow(agent="support-bot", since=now - timedelta(hours=2))
    statement = _window_events(window, EventKind.LLM_CALL, sa.literal_column("event.id"))
    compiled = statement.compile(pg, compile_kwargs={"literal_binds": True})
    with pg.connect() as connection:
        plan = connection.execute(sa.text(f"EXPLAIN (FORMAT JSON) {compiled}")).scalar_one()
    nodes = list(_nodes(plan if isinstance(plan, list) else json.loads(plan)))
    today = [n for n in nodes if n.get("Relation Name") == partition_name("event", now.date())]
    non_user = [n for n in today if "<> 'user'" in n.get("Filter", "") + n.get("Index Cond", "")]
    # The partition's copy of the index is named by PostgreSQL after its columns.
    by_index = {n.get("Index Name") for n in today if n["Node Type"].startswith("Index")}
    assert any(name and "trajectory_id_created_at" in name for name in by_index), today
    assert not [n for n in non_user if n["Node Type"] == "Seq Scan"], non_user


def _nodes(plan):
    """Every node of an EXPLAIN (FORMAT JSON) plan."""
    stack = [entry["Plan"] for entry in plan]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(node.get("Plans", []))


def test_sqlite_has_no_partitions(tmp_path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'r.db'}")
    upgrade(engine)
    assert ensure_partitions(engine, utcnow()) == []
    engine.dispose()


def test_a_role_that_may_not_change_the_schema_still_adds_and_drops_days(
    pg, postgres_schema
) -> None:
    """Gateways and `evoplane gc` run as a role without DDL rights (deploy/README.md):
    the days are made and dropped by the schema owner's functions."""
    role = f"app_{postgres_schema[-10:]}"
    with pg.begin() as connection:
        connection.execute(sa.text(f"CREATE ROLE {role} LOGIN"))
        connection.execute(sa.text(f"GRANT USAGE ON SCHEMA {postgres_schema} TO {role}"))
        connection.execute(
            sa.text(
                f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "
                f"{postgres_schema} TO {role}"
            )
        )
    url = sa.make_url(postgres_schema_url(postgres_schema)).set(username=role)
    app = create_db_engine(str(url))
    try:
        with pytest.raises(sa.exc.ProgrammingError, match="permission denied|must be owner"):
            with app.begin() as connection:
                connection.execute(sa.text("CREATE TABLE event_x PARTITION OF event DEFAULT"))
        later = utcnow() + timedelta(days=AHEAD_DAYS + 1)
        assert ensure_partitions(app, later, ahead=0) == [
            partition_name("event", later.date()),
            partition_name("reward", later.date()),
        ]
        with transaction(app) as session:
            counts = purge_expired(session, later + timedelta(days=2))
        assert counts["partitions"] > 0  # the empty past days, this one among them
    finally:
        app.dispose()
        with pg.begin() as connection:
            connection.execute(sa.text(f"DROP OWNED BY {role}"))
            connection.execute(sa.text(f"DROP ROLE {role}"))
