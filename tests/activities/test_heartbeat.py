"""A synchronous activity's long call heartbeats while it runs, from a thread of its own."""

from __future__ import annotations

import threading
import time

from temporalio.testing import ActivityEnvironment

from activities.heartbeat import beating


def test_a_long_call_heartbeats_while_it_runs_and_stops_after() -> None:
    beats: list[tuple[float, str]] = []
    environment = ActivityEnvironment()
    environment.on_heartbeat = lambda *details: beats.append(
        (time.monotonic(), threading.current_thread().name)
    )

    def long_call() -> float:
        with beating(every=0.05):
            time.sleep(0.5)
        return time.monotonic()

    ended = environment.run(long_call)
    time.sleep(0.2)  # a thread left beating would be seen here
    assert len(beats) >= 5  # one at once, then one every 0.05 s of the 0.5 s
    assert any(name == "heartbeat" for _, name in beats)
    assert all(at <= ended for at, _ in beats)


def test_outside_an_activity_it_does_nothing() -> None:
    with beating(every=0.01):
        time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name == "heartbeat"]
