"""A skill evolution end to end on a real Temporal dev server, registry and upstream: the
policy diagnoses a procedure users keep walking the agent through as `skill`, the skill
operator builds the candidate, and it goes through the replay, shadow and canary gates to
promotion like any other change."""

from __future__ import annotations

import asyncio

import pytest

from activities.models import Outcome
from evolution.decision import Action
from registry import get_evolution, get_version, transaction
from tests.evolution.test_skill_operator import TASK, restores
from tests.workflows.conftest import TENANTS, World
from tests.workflows.test_evolution import (
    REPLAYER,
    action_attribute,
    decided,
    feed_canary,
    start,
)

pytestmark = [pytest.mark.temporal, pytest.mark.slow]


async def test_a_guided_procedure_becomes_a_promoted_skill(world: World, workers) -> None:
    restores(world.engine, guided=12, unguided=4, others=6, tenants=TENANTS)
    parent = world.stable()
    handle = await start(world, decided())
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.8))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason
    assert status.decision.action is Action.SKILL and status.action is Action.SKILL
    assert status.decision.signals["top_procedure_step"] == 3
    assert await action_attribute(handle) == "skill"
    assert world.stable() == status.candidate_version != parent
    with transaction(world.engine) as session:
        spec = get_version(session, status.candidate_version).spec
        record = get_evolution(session, handle.id)
    (skill,) = spec.skills.items
    assert skill.task_types == [TASK]
    built, *gates = record.stages
    assert built["stage"] == "build" and "replay: reaches 12 of 12" in " ".join(built["changes"])
    assert [stage["gate"] for stage in gates] == ["replay", "shadow", "canary"]
    await REPLAYER.replay_workflow(await handle.fetch_history())
