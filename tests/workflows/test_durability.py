"""A worker killed mid-activity: the next worker resumes from the heartbeat, and promotes once."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from activities.models import Outcome, Stage
from tests.workflows.conftest import SAFETY_SUITE, World
from tests.workflows.test_evolution import feed_canary, options, promotions, start, wait_for

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

CASES = 6
DELAY_MS = 700


def start_worker(world: World, data_dir: Path, log: Path | None = None) -> subprocess.Popen:
    """`evoplane worker` in a process (and process group) of its own, so it can be killed -9;
    its output goes to `log` when given."""
    target = world.client.service_client.config.target_host
    env = {
        **os.environ,
        "EVOPLANE_DATABASE_URL": world.database_url,
        "EVOPLANE_TEMPORAL_ADDRESS": target,
        "EVOPLANE_DATA_DIR": str(data_dir),
    }
    output = log.open("w") if log is not None else None
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "evoplane"), "worker", "--gpu", "--no-tracking"],
        env=env,
        start_new_session=True,
        stdout=output,
        stderr=subprocess.STDOUT if output else None,
    )


def kill(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(10)


async def test_a_killed_worker_is_replaced_and_the_evolution_promotes_once(
    world: World, tmp_path
) -> None:
    suite = SAFETY_SUITE * (CASES // len(SAFETY_SUITE))  # a longer suite, answered slowly
    suite = [{**case, "name": f"{case['name']}-{i}"} for i, case in enumerate(suite)]
    with world.engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE agent SET settings = :settings"),
            {"settings": json.dumps({"safety_suite": suite})},
        )
    world.upstream.delay_ms = DELAY_MS
    first = start_worker(world, tmp_path)
    try:
        handle = await start(world, options(candidate=world.spec("Thank the customer.")))
        await wait_for(handle, lambda s: s.stage == Stage.REPLAY, seconds=60)
        while len(world.upstream.requests) < 4:  # mid-suite: two cases, on both versions
            await asyncio.sleep(0.1)
        kill(first)
        answered_before = len(world.upstream.requests)
    except BaseException:
        kill(first)
        raise
    second = start_worker(world, tmp_path)
    try:
        feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.4, candidate=0.8))
        status = await asyncio.wait_for(handle.result(), timeout=120)
        await feeding
    finally:
        kill(second)
    assert status.outcome is Outcome.PROMOTED, status.reason
    assert len(promotions(world, handle.id)) == 1
    # Resumed from the heartbeat: the candidate and the parent answer each case, and at most
    # the case in flight at the kill was asked twice (of each).
    assert answered_before < 2 * CASES
    assert len(world.upstream.requests) <= 2 * (CASES + 1)
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "the replay gate should have been retried after the kill"
    assert status.stage == Stage.DONE


async def test_a_worker_asked_to_stop_leaves_cleanly(world: World, tmp_path) -> None:
    log = tmp_path / "worker.log"
    worker = start_worker(world, tmp_path, log)
    try:
        for _ in range(300):
            if "worker serving" in log.read_text():
                break
            await asyncio.sleep(0.2)
        os.killpg(worker.pid, signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 40)
    finally:
        if worker.poll() is None:
            kill(worker)
    said = log.read_text()
    assert code == 0, said
    assert "stopping: polling ends" in said and "worker stopped" in said
