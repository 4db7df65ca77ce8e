"""The spool and the capture writer: crash-safe, idempotent, and never blocked by one bad record."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

from atdp import new_id, utcnow
from proxy.capture import CaptureRecord, CaptureWriter, Spool
from registry import (
    SessionRoute,
    get_events,
    get_session_route,
    list_rewards,
    register_version,
    route_session,
    transaction,
)
from tests.registry.helpers import event, reward, seed_world, spec, trajectory


def test_spool_round_trip_and_a_torn_last_line_is_skipped(tmp_path) -> None:
    spool = Spool(tmp_path)
    segment = spool.append([{"n": 1}, {"n": 2}])
    with (tmp_path / f"{segment:012d}.jsonl").open("a") as handle:
        handle.write('{"n": 3')  # a crash in the middle of a write
    assert list(spool.read(segment)) == [{"n": 1}, {"n": 2}]
    closed = spool.rotate()
    assert spool.current == closed + 1
    spool.delete(closed)
    assert spool.segments() == [spool.current]


def test_spool_rotates_by_size(tmp_path) -> None:
    spool = Spool(tmp_path, segment_bytes=200)
    segments = {spool.append([{"pad": "x" * 80}]) for _ in range(6)}
    assert len(segments) >= 3


def records_for(t, count: int) -> list[CaptureRecord]:
    events = [event(t, i) for i in range(count)]
    return [
        CaptureRecord("trajectory", t),
        *[CaptureRecord("event", e) for e in events],
        CaptureRecord("reward", reward(t, 1.0, events[0])),
    ]


def test_a_crash_before_the_database_write_is_replayed_exactly_once(engine, tmp_path) -> None:
    seed_world(engine)
    t = trajectory("acme")
    crashed = CaptureWriter(engine, Spool(tmp_path / "spool"))
    crashed.submit(records_for(t, 5))  # spooled; the process "dies" before its thread runs
    leftovers = sorted((tmp_path / "spool").glob("*.jsonl"))
    shutil.copy(leftovers[0], tmp_path / "spool" / "000000000000.jsonl")  # and a stale duplicate

    restarted = CaptureWriter(engine, Spool(tmp_path / "spool"))
    restarted.start()
    restarted.stop()
    with transaction(engine) as session:
        assert [e.seq for e in get_events(session, "acme", t.id)] == [0, 1, 2, 3, 4]
        assert len(list_rewards(session, "acme", trajectory_id=t.id)) == 1
    assert list((tmp_path / "spool").glob("*.jsonl")) == []
    assert restarted.stats.committed == 2 * 7 and restarted.pending == 0


def test_a_refused_record_is_set_aside_and_the_rest_committed(engine, tmp_path) -> None:
    seed_world(engine)
    t = trajectory("acme")
    orphan = reward(trajectory("acme"), 0.0)  # its trajectory was never recorded
    writer = CaptureWriter(engine, Spool(tmp_path / "spool"), flush_interval=0.01)
    writer.start()
    writer.submit([*records_for(t, 2), CaptureRecord("reward", orphan)])
    assert writer.flush(10)
    writer.stop()
    with transaction(engine) as session:
        assert len(get_events(session, "acme", t.id)) == 2
    rejected = [
        json.loads(line)
        for line in (tmp_path / "spool" / "rejected.jsonl").read_text().splitlines()
    ]
    assert [r["data"]["id"] for r in rejected] == [str(orphan.id)]
    assert "not found" in rejected[0]["error"]
    assert (writer.stats.committed, writer.stats.rejected) == (4, 1)
    assert new_id()  # ids stay unique across writers


def test_a_drain_that_dies_is_replaced_and_nothing_is_lost(engine, tmp_path) -> None:
    seed_world(engine)
    first, second = trajectory("acme"), trajectory("acme")
    writer = CaptureWriter(engine, Spool(tmp_path / "spool"), flush_interval=0.01)
    writer.start()
    writer.submit(records_for(first, 3))
    assert writer.flush(10)
    os.kill(writer._drain, signal.SIGKILL)  # the OOM killer, say
    writer.submit(records_for(second, 3))  # spooled, nobody to commit it
    assert not writer.flush(0.5)
    assert writer.ensure_running() and not writer.ensure_running()
    assert writer.flush(10)
    writer.stop()
    with transaction(engine) as session:
        for t in (first, second):
            assert [e.seq for e in get_events(session, "acme", t.id)] == [0, 1, 2]
    assert list((tmp_path / "spool").glob("*.jsonl")) == []


def test_drains_are_forked_with_the_orm_configured() -> None:
    """The zygote configures the registry's mappers before it serves fork requests, so no
    drain's first commit pays for it (seconds on a loaded machine, which another gateway
    waits out). A fresh interpreter, as the zygote is: this one's were configured long ago."""
    code = (
        "import socket, sys, sqlmodel.main, proxy.capture.zygote as zygote\n"
        "mappers = list(sqlmodel.main.default_registry.mappers)\n"
        "print(len(mappers), any(m.configured for m in mappers), end=' ')\n"
        "zygote._serve = lambda _: print(all(m.configured for m in mappers))\n"
        "ours, theirs = socket.socketpair()\n"
        "sys.argv[1:] = [str(theirs.fileno())]\n"
        "zygote.main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    count, imported, prepared = out.stdout.split()
    assert int(count) > 10 and imported == "False" and prepared == "True"


def test_a_placement_that_loses_to_an_earlier_one_comes_back_to_the_gateway(
    engine, tmp_path
) -> None:
    seed_world(engine)

    def placed(session: str, version: str) -> SessionRoute:
        return SessionRoute(
            agent="support-bot",
            tenant="acme",
            session=session,
            version_id=version,
            alias="stable",
            replica=0,
            created_at=utcnow(),
        )

    with transaction(engine) as session:
        other = register_version(
            session, "support-bot", spec("Be brief."), author="t", reason="t"
        ).id
        route_session(session, placed("s-9", other))  # another gateway was first
    writer = CaptureWriter(engine, Spool(tmp_path / "spool"), flush_interval=0.01)
    writer.start()
    writer.submit(
        [
            CaptureRecord("session_route", placed("s-9", "support-bot@v1")),
            CaptureRecord("session_route", placed("s-10", "support-bot@v1")),
        ]
    )
    assert writer.flush(10)
    lost = writer.lost_placements()
    writer.stop()
    assert [(route.session, route.version_id) for route in lost] == [("s-9", other)]
    with transaction(engine) as session:
        assert get_session_route(session, "support-bot", "acme", "s-10").version_id == (
            "support-bot@v1"
        )
