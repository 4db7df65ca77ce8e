"""The holdback after a promotion ends itself: answered, or by a regression's rollback."""

from __future__ import annotations

import asyncio

import pytest

from activities.models import Outcome
from registry import Alias, alias_history, current_aliases, get_evolution, transaction
from tests.workflows.conftest import AGENT, World
from tests.workflows.test_evolution import REPLAYER, feed_canary, options, start
from workflows.evolution import EvolutionWorkflow

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def promoted(world: World) -> tuple[str, str, str]:
    """(parent, the promoted stable, the evolution): a harness fix through its canary, with
    a tenth of new sessions held back on the parent and a holdback of a minute at most."""
    parent = world.stable()
    opts = options(candidate=world.spec("Quote the order id."), gate={"holdback_seconds": 60.0})
    handle = await start(world, opts)
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.4, candidate=0.9))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason
    with transaction(world.engine) as session:
        assert current_aliases(session, AGENT).holdback == parent
    return parent, status.candidate_version, handle.id


async def until(predicate, seconds: float = 45.0) -> None:
    for _ in range(int(seconds / 0.2)):
        if predicate():
            return
        await asyncio.sleep(0.2)
    raise AssertionError("never happened")


def aliases(world: World):
    with transaction(world.engine) as session:
        return current_aliases(session, AGENT)


async def test_a_holdback_ends_itself_once_stable_is_shown_no_worse(world: World, workers) -> None:
    parent, stable, evolution = await promoted(world)
    world.served(stable, [1.0] * 12)
    world.served(parent, [0.0, 1.0] * 6)
    await until(lambda: aliases(world).holdback is None)
    with transaction(world.engine) as session:
        ended = alias_history(session, AGENT, Alias.HOLDBACK)[-1]
        record = get_evolution(session, evolution)
    assert ended.reason.startswith("the holdback answered: stable is shown no worse than its ")
    assert (ended.actor, ended.evolution_id) == ("holdback", evolution)
    assert aliases(world).stable == stable  # nothing else moved
    (kept,) = [stage for stage in record.stages if stage.get("stage") == "holdback"]
    assert kept["verdict"] == "pass" and kept["question"] == "non_inferiority"
    watcher = world.client.get_workflow_handle(await child_of(world, evolution))
    assert (await watcher.result()).startswith("the holdback answered")
    await REPLAYER.replay_workflow(await watcher.fetch_history())


async def test_a_regression_the_holdback_shows_starts_a_rollback_at_once(
    world: World, workers
) -> None:
    parent, stable, evolution = await promoted(world)
    world.served(stable, [0.0] * 12)
    world.served(parent, [1.0] * 12)
    await until(lambda: aliases(world).stable == parent)  # no schedule needed
    assert aliases(world).holdback is None
    watcher = await child_of(world, evolution)
    rollback_id = await child_of(world, watcher)
    status = await world.client.get_workflow_handle_for(EvolutionWorkflow.run, rollback_id).result()
    assert status.outcome is Outcome.ROLLED_BACK, status.reason
    with transaction(world.engine) as session:
        record = get_evolution(session, evolution)
        rollback = get_evolution(session, rollback_id)
    (found,) = [stage for stage in record.stages if stage.get("stage") == "holdback"]
    assert found["verdict"] == "fail"
    assert found["reason"].startswith("the holdback found a regression: holdback gate failed")
    assert (rollback.action, rollback.outcome) == ("rollback", "rolled_back")
    assert rollback.options["actor"] == "holdback"


async def child_of(world: World, workflow_id: str) -> str:
    """The id of the child workflow `workflow_id` started (from its own history, so other
    tests' workflows on the same server never answer)."""
    for _ in range(100):
        history = await world.client.get_workflow_handle(workflow_id).fetch_history()
        for event in history.events:
            if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
                return event.start_child_workflow_execution_initiated_event_attributes.workflow_id
        await asyncio.sleep(0.2)
    raise AssertionError(f"{workflow_id} started no child workflow")
