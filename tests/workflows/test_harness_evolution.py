"""A harness evolution end to end: DSPy's calls reach the real gateway as evaluation traffic."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack

import pytest

from activities.evolution import EvolutionActivities
from activities.models import Outcome
from activities.replay_gate import ReplayGate
from evolution.decision import Action
from evoplane.worker import workers_for
from proxy.config import GatewayConfig
from registry import (
    ALL_TENANTS,
    get_events,
    get_evolution,
    get_version,
    list_trajectories,
    transaction,
)
from tests.evolution.test_harness_operator import FACT, recorded_window
from tests.support.gateway import GatewayServer
from tests.workflows.conftest import World
from tests.workflows.test_evolution import feed_canary, options, start

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


@pytest.fixture
async def gateway_workers(world: World, tmp_path) -> AsyncIterator[GatewayServer]:
    """A gateway on the test's registry, and workers whose harness operator calls it."""
    config = GatewayConfig(database_url=world.database_url, spool_dir=tmp_path / "spool")
    replay = ReplayGate(world.engine, timeout=30)
    with GatewayServer(config) as gateway:
        activities = EvolutionActivities(world.engine, None, replay, gateway_url=gateway.base_url)
        async with AsyncExitStack() as stack:
            executor = stack.enter_context(ThreadPoolExecutor(max_workers=8))
            for worker in workers_for(world.client, activities, executor, gpu=False):
                await stack.enter_async_context(worker)
            yield gateway
    await replay.aclose()


async def test_a_harness_evolution_optimises_through_the_gateway(
    world: World, gateway_workers: GatewayServer
) -> None:
    recorded_window(world.engine)  # refund answers users corrected; opening hours that worked
    parent = world.stable()
    handle = await start(world, options().model_copy(update={"force": Action.HARNESS}))
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.7))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason
    gateway_workers.flush()
    with transaction(world.engine) as session:
        harness = get_version(session, status.candidate_version).spec.harness
        build = get_evolution(session, handle.id).stages[0]
        served = [
            t
            for t in list_trajectories(session, ALL_TENANTS)
            if t.versions.agent_version_id == parent
        ]
        traffic = [
            {e.metadata.traffic for e in get_events(session, ALL_TENANTS, t.id)} for t in served
        ]
    assert FACT in harness.instructions  # the lesson users taught, now in the instructions
    assert build["evidence"]["after"] > build["evidence"]["before"]
    assert any(line.startswith("+") for line in build["changes"][0].splitlines())
    # DSPy's calls were served by the gateway, pinned to the parent, as evaluation traffic
    # (the parent's user trajectories are the canary's baseline, fed by the test).
    assert traffic.count({"evaluation"}) >= 1
    assert all(kinds in ({"evaluation"}, {"user"}) for kinds in traffic)
