"""Bytes per event: event bodies stored whole (before `registry.codec`) and encoded, side by
side on the window benchmark's data, and what reading them costs.

    .venv/bin/python -m benchmarks.event_storage [--trajectories 10000]
        [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--analyse]

For each way of storing: a fresh schema seeded as `benchmarks.window_analysis` seeds it
(its templates written with `registry.write_batch`, then COPYed again across one day);
"whole" writes the templates' bodies as the registry did before the codec (the ATDP
document as it is). Prints, per event: the whole `event` table (every partition's heap,
TOAST and indexes, `pg_total_relation_size`), each of those apart, and the body alone
(`pg_column_size`); the time to read 2,000 trajectories' events back
(`registry.get_events`, which rebuilds the documents) and checks that both read the same
documents; the CPU a capture writer spends on a body either way; with `--analyse`, the
window analysis of each (`read_window` sampled, as the `decide` activity runs it) with
its decision. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from unittest import mock

import sqlalchemy as sa

from atdp import utcnow
from benchmarks import window_analysis
from benchmarks.support import POSTGRES, drop_schema, fresh_schema_url
from registry import ALL_TENANTS, create_db_engine, get_events, transaction, upgrade
from registry.codec import Earlier, encode
from registry.db import dumps_json, may_hold_big_floats
from registry.tables import TrajectoryRow

WAYS = ("whole", "encoded")
READ_BACK = 2_000  # trajectories read back with get_events

_SIZES = """
    SELECT sum(pg_relation_size(p.relid)),
           sum(coalesce(pg_relation_size(c.reltoastrelid), 0)),
           sum(pg_indexes_size(p.relid)),
           sum(pg_total_relation_size(p.relid))
    FROM pg_partition_tree('event') p JOIN pg_class c ON c.oid = p.relid
    WHERE p.isleaf
"""


@dataclass
class Stored:
    way: str
    events: int
    heap: int
    toast: int
    indexes: int
    total: int
    body: float  # average pg_column_size(body)
    seed_s: float
    read_s: float
    documents: list  # what get_events read back of the first READ_BACK trajectories' events
    analysis: dict | None
    write_cost: tuple[float, float] | None  # µs an event, (whole, encoded)


@contextlib.contextmanager
def _storing(way: str) -> Iterator[None]:
    """ "whole": write bodies as the registry did before the codec, the document as is."""
    if way == "encoded":
        yield
        return
    with mock.patch("registry.bulk.stored_bodies", lambda session, documents: list(documents)):
        yield


def measure(database_url: str, trajectories: int, way: str, *, analyse: bool) -> Stored:
    url, schema = fresh_schema_url(url=database_url)
    try:
        engine = create_db_engine(url)
        upgrade(engine)
        until = utcnow() + timedelta(minutes=10)
        started = time.perf_counter()
        with _storing(way):
            window_analysis.seed(engine, trajectories, until)
        seeded = time.perf_counter() - started
        with engine.connect() as connection:
            events = connection.execute(sa.text("SELECT count(*) FROM event")).scalar_one()
            heap, toast, indexes, total = connection.execute(sa.text(_SIZES)).one()
            body = connection.execute(sa.text("SELECT avg(pg_column_size(body)) FROM event"))
            body = float(body.scalar_one())
        read_s, found = _read_back(engine)
        documents = [[_shape(e) for e in events] for events in found]
        cost = write_cost(found) if way == "whole" else None
        engine.dispose()
        analysis = None
        if analyse:
            since = until - window_analysis.DAY
            analysis = window_analysis._measure_apart(url, since, until, profile=False)
        return Stored(
            way,
            events,
            heap,
            toast,
            indexes,
            total,
            body,
            seeded,
            read_s,
            documents,
            analysis,
            cost,
        )
    finally:
        drop_schema(schema, database_url)


def _read_back(engine: sa.Engine) -> tuple[float, list]:
    """Seconds to read the events of the first READ_BACK trajectories, and their shapes."""
    with transaction(engine) as session:
        rows = session.execute(
            sa.select(TrajectoryRow.id)
            .order_by(TrajectoryRow.started_at, TrajectoryRow.id)
            .limit(READ_BACK)
        )
        ids = [row.id for row in rows]
    started = time.perf_counter()
    with transaction(engine) as session:
        found = [get_events(session, ALL_TENANTS, trajectory_id) for trajectory_id in ids]
    elapsed = time.perf_counter() - started
    return elapsed, found


def write_cost(trajectories: list[list]) -> tuple[float, float]:
    """Microseconds of CPU a capture writer spends on an event's body, the best of three
    interleaved rounds: (as before the codec: its JSON text checked for big floats; now:
    that text parsed, encoded against the trajectory's previous call, written as JSON)."""
    texts = [[event.model_dump_json() for event in events] for events in trajectories]
    count = sum(map(len, texts))
    before, now = [], []
    for _ in range(3):
        started = time.perf_counter()
        for events in texts:
            for text in events:
                may_hold_big_floats(text)
        before.append(time.perf_counter() - started)
        started = time.perf_counter()
        for events in texts:
            earlier = None
            for text in events:
                document = json.loads(text)
                body = encode(document, earlier)
                dumps_json(body)
                if document["kind"] == "llm_call":
                    earlier = Earlier.of(document, body)
        now.append(time.perf_counter() - started)
    return min(before) / count * 1e6, min(now) / count * 1e6


def _shape(event) -> tuple:
    """What stays the same in both seeds: the kind and the conversation."""
    observation = event.observation
    return (event.seq, event.kind.value, len(observation.messages) if observation else None)


def _report(trajectories: int, runs: list[Stored]) -> Iterator[str]:
    yield f"\n{trajectories:,} trajectories, bytes per event:\n"
    yield (
        "| bodies | events | total (table+TOAST+indexes) | heap | TOAST | indexes | body "
        "| seed (s) | read 2,000 trajectories (s) |"
    )
    yield "|---|---|---|---|---|---|---|---|---|"
    for r in runs:
        n = r.events
        yield (
            f"| {r.way} | {n:,} | {r.total / n:.0f} | {r.heap / n:.0f} | {r.toast / n:.0f} "
            f"| {r.indexes / n:.0f} | {r.body:.0f} | {r.seed_s:.0f} | {r.read_s:.2f} |"
        )
    before, after = runs
    per_event = (before.total / before.events) / (after.total / after.events)
    yield (
        f"\nwhole / encoded: total {per_event:.2f}x,"
        f" body {before.body / after.body:.2f}x; the read-back events' shapes "
        f"{'match' if before.documents == after.documents else 'DIFFER'}"
    )
    if before.write_cost:
        was, now = before.write_cost
        yield (
            f"\nCPU a capture writer spends on an event's body: {was:.1f} µs whole, "
            f"{now:.1f} µs encoded (parse, encode with its round-trip check, write JSON)"
        )
    if before.analysis:
        yield "\n| bodies | read_window (s) | measure_window (s) | peak RSS (MiB) | decision |"
        yield "|---|---|---|---|---|"
        for r in runs:
            x = r.analysis
            yield (
                f"| {r.way} | {x['read_s']:.2f} | {x['measure_s']:.2f} | {x['peak_mib']:.0f} "
                f"| {x['action']} ({x.get('target')}) |"
            )
        yield "\nSQL time by registry function (s), whole / encoded:"
        calls = sorted(before.analysis["sql"], key=lambda c: -before.analysis["sql"][c][0])
        for caller in calls:
            was, now = before.analysis["sql"][caller][0], after.analysis["sql"].get(caller, [0])[0]
            yield f"- {caller}: {was:.2f} / {now:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=10_000)
    parser.add_argument("--database-url", default=POSTGRES)
    parser.add_argument("--analyse", action="store_true", help="also run the window analysis")
    args = parser.parse_args()
    runs = []
    for way in WAYS:
        runs.append(measure(args.database_url, args.trajectories, way, analyse=args.analyse))
        print(f"{way}: seeded in {runs[-1].seed_s:.0f} s", flush=True)
    print("\n".join(_report(args.trajectories, runs)))


if __name__ == "__main__":
    main()
