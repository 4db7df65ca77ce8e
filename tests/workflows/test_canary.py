"""The canary ramp on a real Temporal dev server and registry: steps that advance while no
harm is evident, and a canary still open at the end of its budget that asks a person."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError

from activities.models import CanaryAnswer, EvolutionStatus, Outcome, Stage
from evolution.gates import Verdict
from registry import Alias, alias_history, current_aliases, get_evolution, transaction
from tests.workflows.conftest import AGENT, World
from tests.workflows.test_evolution import (
    REPLAYER,
    SMALL_WINDOW,
    live,
    options,
    refund_corrections,
    start,
    wait_for,
)
from workflows.evolution import EvolutionWorkflow

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

ASK = {"when_inconclusive": "ask", "canary_seconds": 4.0, "max_canary_seconds": 50.0}


async def details(handle: WorkflowHandle) -> str:
    """The workflow's current details, as the Temporal UI shows them."""
    metadata = await handle.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


async def canary_live(world: World, handle: WorkflowHandle) -> EvolutionStatus:
    status = await wait_for(handle, lambda s: s.stage == Stage.CANARY)
    await live(world, "canary", status.candidate_version)
    return status


def even(world: World, status: EvolutionStatus) -> None:
    """Both versions earn the same noisy rewards: no harm, and no answer either."""
    world.served(status.parent_version, [0.0, 1.0] * 6)
    world.served(status.candidate_version, [0.0, 1.0] * 6)


def clearly_better(world: World, status: EvolutionStatus) -> None:
    world.served(status.parent_version, [0.0] * 24)
    world.served(status.candidate_version, [1.0] * 24)


def canary_verdicts(status: EvolutionStatus) -> list[tuple[int | None, Verdict]]:
    return [(g.step, g.verdict) for g in status.gates if g.gate == "canary"]


def canary_moves(world: World) -> list[tuple[str | None, float]]:
    with transaction(world.engine) as session:
        return [(m.version_id, m.weight) for m in alias_history(session, AGENT, Alias.CANARY)]


async def test_a_step_advances_while_no_harm_is_evident_and_only_the_last_answers(
    world: World, workers
) -> None:
    handle = await start(
        world,
        options(
            candidate=world.spec("Name the order."),
            gate={"step_weights": [0.2, 0.5], "canary_seconds": 30.0},
        ),
    )
    status = await canary_live(world, handle)
    even(world, status)  # the first step's question stays open: it advances all the same
    await wait_for(handle, lambda s: len(canary_verdicts(s)) >= 1)
    for _ in range(300):
        if canary_moves(world)[-1][1] == 0.5:
            break
        await asyncio.sleep(0.1)
    assert canary_moves(world)[-1] == (status.candidate_version, 0.5)
    clearly_better(world, status)
    done = await handle.result()
    assert done.outcome is Outcome.PROMOTED, done.reason
    verdicts = canary_verdicts(done)
    assert verdicts[0] == (1, Verdict.MARGINAL)  # no harm, question open: advanced
    assert verdicts[-1] == (2, Verdict.PASS)  # only the last step's pass promotes
    assert [w for v, w in canary_moves(world) if v is not None] == [0.2, 0.5]
    await REPLAYER.replay_workflow(await handle.fetch_history())


async def test_harm_at_the_first_step_stops_the_ramp_there(world: World, workers) -> None:
    parent = world.stable()
    handle = await start(
        world,
        options(
            candidate=world.spec("Be curt."),
            gate={"step_weights": [0.2, 0.5], "canary_seconds": 30.0},
        ),
    )
    status = await canary_live(world, handle)
    world.served(status.parent_version, [0.9] * 12)
    world.served(status.candidate_version, [0.1] * 12)
    done = await handle.result()
    assert done.outcome is Outcome.ROLLED_BACK, done.reason
    assert canary_verdicts(done) == [(1, Verdict.FAIL)]
    assert canary_moves(world)[-2:] == [(status.candidate_version, 0.2), (None, 0.0)]
    assert world.stable() == parent


@pytest.mark.parametrize("choice", ["extend", "promote", "roll_back"])
async def test_an_inconclusive_canary_waits_for_a_person_and_does_as_told(
    world: World, workers, choice: str
) -> None:
    parent = world.stable()
    handle = await start(world, options(candidate=world.spec("Say it twice."), gate=ASK))
    with pytest.raises(WorkflowUpdateFailedError):  # not asking yet: the validator refuses
        await handle.execute_update(
            EvolutionWorkflow.answer_canary, CanaryAnswer(actor="early", choice="promote")
        )
    status = await canary_live(world, handle)
    even(world, status)
    asked = await wait_for(handle, lambda s: s.inconclusive is not None)
    assert asked.stage == Stage.AWAITING_APPROVAL
    # Even rewards: the estimate is no gain, and more sessions would not show one.
    assert asked.inconclusive.sessions_more is None
    assert "more sessions would not answer it" in asked.inconclusive.words
    assert "waiting for a person to extend, promote or roll back" in await details(handle)
    with transaction(world.engine) as session:  # it keeps serving (and looking) meanwhile
        assert current_aliases(session, AGENT).canary == status.candidate_version
    answer = CanaryAnswer(actor="ana", choice=choice, hours=0.01, reason="seen enough")
    answered = await handle.execute_update(EvolutionWorkflow.answer_canary, answer)
    assert answered.inconclusive is None
    if choice == "extend":
        clearly_better(world, status)  # the extension brings the answer
    done = await handle.result()
    if choice == "roll_back":
        assert done.outcome is Outcome.ROLLED_BACK, done.reason
        assert done.reason == "canary gate inconclusive; rolled back by ana: seen enough"
        assert world.stable() == parent and canary_moves(world)[-1] == (None, 0.0)
        return
    assert done.outcome is Outcome.PROMOTED, done.reason
    assert world.stable() == done.candidate_version
    last = canary_verdicts(done)[-1][1]
    with transaction(world.engine) as session:
        promoted = alias_history(session, AGENT, Alias.STABLE)[-1]
    if choice == "extend":
        assert last is Verdict.PASS and "canary inconclusive" not in promoted.reason
    else:  # a person's call, never recorded as a pass
        assert last is Verdict.MARGINAL
        assert "canary inconclusive, promoted by ana: seen enough" in promoted.reason
        assert "canary inconclusive, promoted by ana: seen enough" in done.reason
    await REPLAYER.replay_workflow(await handle.fetch_history())


async def test_extend_looks_on_until_the_longest_a_canary_may_run(world: World, workers) -> None:
    gate = {"when_inconclusive": "extend", "canary_seconds": 4.0, "max_canary_seconds": 8.0}
    handle = await start(world, options(candidate=world.spec("Say it thrice."), gate=gate))
    status = await canary_live(world, handle)
    even(world, status)
    done = await handle.result()
    assert done.outcome is Outcome.ROLLED_BACK, done.reason
    assert done.reason.startswith("canary gate inconclusive after ")
    assert ", its longest: " in done.reason
    looks = canary_verdicts(done)
    assert len(looks) >= 3 and {v for _, v in looks} == {Verdict.MARGINAL}


async def test_the_plan_is_in_the_decision_record_and_the_status_before_the_canary(
    world: World, workers
) -> None:
    """A dozen rewarded sessions in a 24-hour window are today's traffic: far too little to
    answer a canary within its budget, which the decision counts against the change and
    says."""
    refund_corrections(world.engine, 6)
    world.served(world.stable(), [0.0, 1.0] * 3)
    opts = options().model_copy(  # the served rewards have no recorded calls to replay
        update={"force": None, "policy": SMALL_WINDOW, "skip_gates": ["replay", "shadow"]}
    )
    handle = await start(world, opts)
    status = await canary_live(world, handle)
    even(world, status)
    done = await handle.result()
    assert done.plan is not None and not done.plan.answerable
    chosen = next(s for s in done.decision.scores if s.action is done.action)
    assert chosen.plan == done.plan
    assert "its canary: superiority: ~" in chosen.evidence
    assert "more than the canary's" in done.decision.reason
    with transaction(world.engine) as session:
        record = get_evolution(session, handle.id)
    assert 0 < record.decision["signals"]["rewarded_per_hour"] <= 12 / 24
