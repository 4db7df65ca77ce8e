"""The worker runs synchronous activities in a pool of EVOPLANE_WORKER_ACTIVITY_THREADS
threads and takes no more activities at once than it has threads for."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio import activity, workflow
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from activities.evolution import EvolutionActivities
from evoplane.settings import load_settings
from evoplane.worker import activity_executor, workers_for
from tests.support.intervals import most_at_once
from workflows.queues import CONTROL_QUEUE

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

PROBE = "test-worker-slot-probe"
HOLD = 0.4  # seconds each probe keeps its slot


class SlotProbes(EvolutionActivities):
    """The control worker's activities, `begin` replaced by a probe that notes when the
    server handed it out, when it finished and which thread ran it."""

    def __init__(self) -> None:
        self.held: list[tuple[datetime, datetime]] = []
        self.threads: set[str] = set()

    @activity.defn(name=PROBE)
    def begin(self, index: int) -> int:
        started = activity.info().started_time
        self.threads.add(threading.current_thread().name)
        time.sleep(HOLD)
        self.held.append((started, datetime.now(UTC)))
        return index


@workflow.defn(sandboxed=False)
class ManyAtOnce:
    @workflow.run
    async def run(self, count: int) -> list[int]:
        return await asyncio.gather(
            *(
                workflow.execute_activity(
                    PROBE,
                    index,
                    task_queue=CONTROL_QUEUE,
                    start_to_close_timeout=timedelta(seconds=30),
                )
                for index in range(count)
            )
        )


async def test_sync_activities_run_in_the_configured_pool_and_no_more_are_taken(
    temporal_env, monkeypatch
) -> None:
    monkeypatch.setenv("EVOPLANE_WORKER_ACTIVITY_THREADS", "3")
    settings = load_settings()
    probes = SlotProbes()
    queue = f"test-worker-{uuid.uuid4().hex[:8]}"
    client = temporal_env.client
    with activity_executor(settings, gpu=False) as executor:
        (control,) = workers_for(
            client, probes, executor, gpu=False, slots=settings.worker_activity_threads
        )
        probe = Worker(
            client,
            task_queue=queue,
            workflows=[ManyAtOnce],
            workflow_runner=UnsandboxedWorkflowRunner(),
        )
        async with control, probe:
            done = await client.execute_workflow(
                ManyAtOnce.run,
                9,
                id=f"slot-probe-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
                execution_timeout=timedelta(seconds=45),
            )
    assert sorted(done) == list(range(9))
    assert probes.threads and all(name.startswith("evoplane-activity") for name in probes.threads)
    assert len(probes.threads) == 3
    # Held from when the server handed a task out: a worker that took more tasks than it
    # has threads would hold them while they wait for one.
    assert most_at_once(probes.held) == 3
