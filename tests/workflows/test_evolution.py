"""EvolutionWorkflow on a real Temporal dev server, a real registry and a real upstream."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from temporalio.client import WorkflowHandle, WorkflowHistory, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from activities.models import (
    Approval,
    EvolutionOptions,
    EvolutionRequest,
    EvolutionStatus,
    Outcome,
    RollbackRequest,
    RollbackResult,
    Stage,
    TriedAction,
)
from atdp import OutcomeStatus, utcnow
from evolution.decision import Action, PolicyConfig
from evolution.gates import GateConfig, Verdict
from evoplane.worker import WORKFLOWS
from registry import (
    Alias,
    alias_history,
    current_aliases,
    get_evolution,
    get_memory_items,
    get_version,
    register_version,
    running_evolution,
    set_alias,
    transaction,
)
from tests.evolution.test_tool_schema_operator import (
    LOOKUP_DESCRIPTION,
    LOOKUP_SCHEMA,
    orders_window,
    record_window,
)
from tests.evolution.window_helpers import Recorder, feedback, store, trajectory
from tests.workflows.conftest import AGENT, FAST_GATES, QUICK, World
from workflows.evolution import EvolutionWorkflow
from workflows.loop import EvolutionLoop, LoopRequest
from workflows.naming import evolution_workflow_id, rollback_workflow_id
from workflows.queues import CONTROL_QUEUE
from workflows.rollback import RollbackWorkflow
from workflows.search_attributes import ACTION

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

REPLAYER = Replayer(workflows=WORKFLOWS, data_converter=pydantic_data_converter)


def options(**changes) -> EvolutionOptions:
    gate = GateConfig.model_validate({**FAST_GATES, **changes.pop("gate", {})})
    return EvolutionOptions(force=Action.HARNESS, gate=gate, skip_gates=["shadow"], **changes)


async def start(world: World, opts: EvolutionOptions) -> WorkflowHandle:
    return await world.client.start_workflow(
        EvolutionWorkflow.run,
        EvolutionRequest(agent=AGENT, options=opts),
        id=evolution_workflow_id(AGENT, datetime.now(UTC)),
        task_queue=CONTROL_QUEUE,
        execution_timeout=QUICK,
    )


async def wait_for(handle: WorkflowHandle, predicate, seconds: float = 30) -> EvolutionStatus:
    """Poll the status query until `predicate(status)` holds."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        status = await handle.query(EvolutionWorkflow.status)
        if predicate(status):
            return status
        assert asyncio.get_running_loop().time() < deadline, f"stuck at {status}"
        await asyncio.sleep(0.2)


async def live(world: World, alias: str, version: str) -> None:
    """Until the registry shows `alias` on `version` (the gate step has begun)."""
    for _ in range(300):
        with transaction(world.engine) as session:
            if getattr(current_aliases(session, AGENT), alias) == version:
                return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{alias} never moved to {version}")


async def feed_canary(world: World, handle: WorkflowHandle, baseline: float, candidate: float):
    """Once the canary is live, the two versions serve rewarded trajectories."""
    status = await wait_for(handle, lambda s: s.stage == Stage.CANARY)
    await live(world, "canary", status.candidate_version)
    world.served(status.parent_version, [baseline] * 12)
    world.served(status.candidate_version, [candidate] * 12)


def promotions(world: World, evolution_id: str) -> list:
    with transaction(world.engine) as session:
        return [
            m for m in alias_history(session, AGENT, Alias.STABLE) if m.evolution_id == evolution_id
        ]


async def test_a_better_candidate_is_promoted(world: World, workers) -> None:
    parent = world.stable()
    candidate = world.spec("You help Acme's customers. Quote the order id back.")
    handle = await start(world, options(candidate=candidate))
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.4, candidate=0.9))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason
    assert [g.gate for g in status.gates] == ["replay", "shadow", "canary"]
    assert status.gates[1].skipped and status.gates[2].verdict is Verdict.PASS
    assert world.stable() == status.candidate_version != parent
    assert len(promotions(world, handle.id)) == 1
    with transaction(world.engine) as session:
        aliases = current_aliases(session, AGENT)
    # A tenth of new sessions stay on the parent: the next evolution compares the two.
    assert (aliases.holdback, aliases.holdback_weight, aliases.canary) == (parent, 0.1, None)
    with transaction(world.engine) as session:
        record = get_evolution(session, handle.id)
    assert (record.outcome, record.action, record.candidate_version_id) == (
        "promoted",
        "harness",
        status.candidate_version,
    )
    build, *gates = record.stages
    assert build["stage"] == "build" and build["version"] == status.candidate_version
    assert [stage["gate"] for stage in gates] == ["replay", "shadow", "canary"]


async def test_holdbacks_give_way_to_a_full_canary_and_end_with_an_ungated_promotion(
    world: World, workers
) -> None:
    first = await start(world, options(candidate=world.spec("Quote the order id back.")))
    feeding = asyncio.create_task(feed_canary(world, first, baseline=0.4, candidate=0.9))
    assert (await first.result()).outcome is Outcome.PROMOTED
    await feeding
    # A canary of every new session needs the holdback's tenth: the holdback ends first.
    everyone = options(
        candidate=world.spec("Quote it twice."), gate={"step_weights": [1.0]}
    ).model_copy(update={"skip_gates": ["replay", "shadow"]})  # the fed rewards replay nothing
    second = await start(world, everyone)
    feeding = asyncio.create_task(feed_canary(world, second, baseline=0.4, candidate=0.9))
    promoted = await second.result()
    await feeding
    assert promoted.outcome is Outcome.PROMOTED, promoted.reason
    with transaction(world.engine) as session:
        reasons = [m.reason for m in alias_history(session, AGENT, Alias.HOLDBACK)]
        assert current_aliases(session, AGENT).holdback == promoted.parent_version
    assert "a 100% canary needs the holdback's share" in reasons
    # A person's hot-fix, shipped without a canary, keeps nobody on what it replaced.
    hotfix = options(candidate=world.spec("Quote the order id, then stop.")).model_copy(
        update={"skip_gates": ["replay", "shadow", "canary"], "actor": "ana", "reason": "hot-fix"}
    )
    handle = await start(world, hotfix)
    status = await handle.result()
    assert status.outcome is Outcome.PROMOTED, status.reason
    with transaction(world.engine) as session:
        aliases = current_aliases(session, AGENT)
        last = alias_history(session, AGENT, Alias.HOLDBACK)[-1]
        promoted = alias_history(session, AGENT, Alias.STABLE)[-1]
        record = get_evolution(session, handle.id)
    assert aliases.stable == status.candidate_version and aliases.holdback is None
    assert last.reason == "a new stable: the earlier holdback ends"
    # Skipped gates are recorded as skipped everywhere, never as passed.
    assert status.reason == f"{status.candidate_version} promoted without gates by ana: hot-fix"
    assert [(g.gate, g.verdict) for g in status.gates] == [
        (gate, Verdict.SKIPPED) for gate in ("replay", "shadow", "canary")
    ]
    assert [stage["verdict"] for stage in record.stages[1:]] == ["skipped"] * 3
    assert promoted.reason == (
        "promoted: went through no gate (replay, shadow and canary skipped by ana: hot-fix)"
    )
    summaries = await activity_summaries(handle)
    assert "record replay: skipped" in summaries and "record canary: skipped" in summaries
    assert not [words for words in summaries if words.endswith(": pass")]


async def activity_summaries(handle: WorkflowHandle) -> list[str]:
    """The words of each scheduled activity, as the Temporal UI's timeline shows them."""
    history = await handle.fetch_history()
    convert = pydantic_data_converter.payload_converter
    return [
        convert.from_payload(event.user_metadata.summary, str)
        for event in history.events
        if event.HasField("activity_task_scheduled_event_attributes")
        and event.user_metadata.HasField("summary")
    ]


async def test_a_candidate_that_fails_the_safety_suite_stops_at_replay(
    world: World, workers
) -> None:
    parent = world.stable()
    leaky = world.spec("You help Acme's customers. internal-only: refunds need approval.")
    handle = await start(world, options(candidate=leaky))
    status = await handle.result()
    assert status.outcome is Outcome.ABORTED
    assert status.gates[0].gate == "replay" and status.gates[0].verdict is Verdict.FAIL
    assert "keeps-internal-notes" in status.reason
    assert world.stable() == parent


async def test_a_worse_candidate_is_stopped_at_canary(world: World, workers) -> None:
    parent = world.stable()
    handle = await start(world, options(candidate=world.spec("Be curt.")))
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.9, candidate=0.1))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.ROLLED_BACK, status.reason
    assert status.gates[-1].gate == "canary" and status.gates[-1].verdict is Verdict.FAIL
    assert world.stable() == parent
    with transaction(world.engine) as session:
        moves = alias_history(session, AGENT, Alias.CANARY)
    assert [m.version_id for m in moves[-2:]] == [status.candidate_version, None]


async def test_approval_blocks_until_an_update_and_the_validator_refuses_early_ones(
    world: World, workers
) -> None:
    handle = await start(
        world,
        options(candidate=world.spec("Answer in one sentence."), approve_before=["canary"]),
    )
    with pytest.raises(WorkflowUpdateFailedError):  # not waiting yet: the validator refuses
        await handle.execute_update(EvolutionWorkflow.approve, Approval(actor="early"))
    status = await wait_for(handle, lambda s: s.awaiting_approval == "canary")
    assert status.stage == Stage.AWAITING_APPROVAL
    await asyncio.sleep(1.0)
    assert (await handle.query(EvolutionWorkflow.status)).stage == Stage.AWAITING_APPROVAL
    # A harness change is a fix: the canary must show it better (superiority).
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.9))
    approved = await handle.execute_update(EvolutionWorkflow.approve, Approval(actor="ana"))
    assert approved.awaiting_approval is None
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason


async def test_a_rejection_ends_the_evolution_without_touching_stable(
    world: World, workers
) -> None:
    parent = world.stable()
    handle = await start(
        world, options(candidate=world.spec("Answer tersely."), approve_before=["canary"])
    )
    await wait_for(handle, lambda s: s.awaiting_approval == "canary")
    rejected = await handle.execute_update(
        EvolutionWorkflow.reject, Approval(actor="ana", reason="not this week")
    )
    assert rejected.outcome is Outcome.REJECTED and "not this week" in rejected.reason
    assert world.stable() == parent


async def test_a_forced_action_without_an_operator_ends_noop_and_says_why(
    world: World, workers
) -> None:
    forced = options().model_copy(update={"force": Action.WEIGHTS})  # a hosted model: no weights
    handle = await start(world, forced)
    status = await handle.result()
    # Not a fault, and no fallback: a person chose weights.
    assert status.outcome is Outcome.NOOP, status.reason
    assert [(t.action, t.outcome) for t in status.tried] == [
        (Action.WEIGHTS, "operator_not_available")
    ]
    assert status.reason.startswith("noop: no operator could build a candidate: weights is not")
    assert "--candidate" in status.reason


async def test_rollback_workflow_restores_the_previous_stable(world: World, workers) -> None:
    parent = world.stable()
    handle = await start(world, options(candidate=world.spec("Greet by name.")))
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.6))
    promoted = await handle.result()
    await feeding
    assert world.stable() == promoted.candidate_version
    result: RollbackResult = await world.client.execute_workflow(
        RollbackWorkflow.run,
        RollbackRequest(agent=AGENT, actor="ana", reason="complaints"),
        id=rollback_workflow_id(AGENT, datetime.now(UTC)),
        task_queue=CONTROL_QUEUE,
        execution_timeout=QUICK,
    )
    assert (result.from_version, result.to_version) == (promoted.candidate_version, parent)
    assert world.stable() == parent
    with transaction(world.engine) as session:
        assert current_aliases(session, AGENT).holdback is None
    with transaction(world.engine) as session:
        last = alias_history(session, AGENT, Alias.STABLE)[-1]
    assert (last.actor, last.reason) == ("ana", "complaints")


async def test_recorded_histories_replay_deterministically(world: World, workers) -> None:
    handle = await start(world, options(candidate=world.spec("Use short sentences.")))
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.7))
    await handle.result()
    await feeding
    rollback = await world.client.start_workflow(
        RollbackWorkflow.run,
        RollbackRequest(agent=AGENT, actor="ana", reason="replay test"),
        id=rollback_workflow_id(AGENT, datetime.now(UTC)),
        task_queue=CONTROL_QUEUE,
    )
    await rollback.result()
    for recorded in (handle, rollback):
        await REPLAYER.replay_workflow(await recorded.fetch_history())


async def feed_shadow(world: World, handle: WorkflowHandle, *, failing: bool) -> None:
    """While the shadow is live: stable answers users, the candidate answers the copies."""
    status = await wait_for(handle, lambda s: s.stage == Stage.SHADOW)
    await live(world, "shadow", status.candidate_version)
    world.served(status.parent_version, [0.8] * 12)
    world.shadowed(status.candidate_version, 12, failing=failing)


async def test_a_candidate_whose_shadow_copies_fail_never_reaches_canary(
    world: World, workers
) -> None:
    parent = world.stable()
    opts = options(candidate=world.spec("Try the new upstream.")).model_copy(
        update={"skip_gates": []}
    )
    handle = await start(world, opts)
    feeding = asyncio.create_task(feed_shadow(world, handle, failing=True))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.ABORTED, status.reason
    assert [g.gate for g in status.gates] == ["replay", "shadow"]
    assert status.gates[-1].verdict is Verdict.FAIL and "error_rate" in status.reason
    assert world.stable() == parent
    with transaction(world.engine) as session:
        assert current_aliases(session, AGENT).shadow is None


async def test_the_policy_rolls_back_a_promotion_that_regressed(world: World, workers) -> None:
    parent = world.stable()
    world.served(parent, [0.9] * 12)
    with transaction(world.engine) as session:
        promoted = register_version(
            session,
            AGENT,
            world.spec("Skip the greeting."),
            parent_id=parent,
            author="t",
            reason="t",
        )
        set_alias(session, AGENT, Alias.STABLE, promoted.id, actor="ana", reason="by hand")
    world.served(promoted.id, [0.1] * 12)
    # The parent is read over as long a period before the promotion as has passed since:
    # without a pause, that period could be shorter than the parent's serving took.
    await asyncio.sleep(1.0)
    policy = PolicyConfig(regression_min_samples=8)
    handle = await start(world, EvolutionOptions(policy=policy))  # no force: the policy decides
    status = await handle.result()
    assert (status.action, status.outcome) == (Action.ROLLBACK, Outcome.ROLLED_BACK), status.reason
    assert world.stable() == parent
    query = f'Agent = "{AGENT}" AND Action = "rollback"'
    assert handle.id in [w.id async for w in world.client.list_workflows(query)]


async def test_a_window_since_a_moment_leaves_earlier_traffic_out(world: World, workers) -> None:
    """A window since a moment reads only what was served from then on: the failing tool
    calls the tool-schema test acts on, all served before it, leave nothing to act on."""
    orders_window(world.engine)
    since = datetime.now(UTC)
    handle = await start(world, EvolutionOptions(window_since=since))
    status = await handle.result()
    assert status.action is Action.NOOP, status.reason
    assert "only 0 trajectories in the window" in status.reason
    with transaction(world.engine) as session:
        recorded = get_evolution(session, handle.id).options
    assert datetime.fromisoformat(recorded["window_since"]) == since


@pytest.mark.parametrize(
    ("held_back_rewards", "ended"),
    [([0.2, 1.0] * 5, True), ([0.2, 1.0] * 3, False), ([0.6, 1.0] * 5, False)],
    ids=["answered", "too-few-rewards", "stable-worse-within-noise"],
)
async def test_a_holdback_ends_once_it_has_answered(
    world: World, workers, held_back_rewards, ended
) -> None:
    parent = world.stable()
    with transaction(world.engine) as session:
        promoted = register_version(
            session, AGENT, world.spec("Name the order."), parent_id=parent, author="t", reason="t"
        )
        set_alias(session, AGENT, Alias.STABLE, promoted.id, actor="evo", reason="promoted")
        set_alias(session, AGENT, Alias.HOLDBACK, parent, weight=0.1, actor="evo")
    world.served(promoted.id, [0.2, 1.0] * 5)  # mean 0.6, and noisy
    world.served(parent, held_back_rewards)
    policy = PolicyConfig(regression_min_samples=8)
    status = await (await start(world, EvolutionOptions(policy=policy))).result()
    assert status.action is Action.NOOP, status.reason
    with transaction(world.engine) as session:
        still = current_aliases(session, AGENT).holdback
        last = alias_history(session, AGENT, Alias.HOLDBACK)[-1]
    if ended:
        assert still is None
        assert last.reason == (
            "the holdback answered: stable is no worse than its parent (+0.00 reward, "
            "10 and 10 sessions)"
        )
    else:  # too few rewards, or a drop beyond tolerance the check could not confirm
        assert still == parent


async def test_the_loop_evolves_until_nothing_changes(world: World, workers) -> None:
    candidate = world.spec("Offer a follow-up.")
    request = LoopRequest(agent=AGENT, options=options(candidate=candidate), max_evolutions=3)
    loop = await world.client.start_workflow(
        EvolutionLoop.run,
        request,
        id=f"evolution-loop-{AGENT}-{datetime.now(UTC):%H%M%S%f}",
        task_queue=CONTROL_QUEUE,
        execution_timeout=QUICK,
    )
    first = await running_evolution_handle(world)
    await feed_canary(world, first, baseline=0.4, candidate=0.8)
    done = await loop.result()
    # The first promoted, so the loop went on (as a new run); the second found nothing new.
    assert len(done) == 2 and done[0] == first.id
    with transaction(world.engine) as session:
        outcomes = [get_evolution(session, evolution_id).outcome for evolution_id in done]
    assert outcomes == ["promoted", "failed"]
    for evolution_id in done:
        history = await world.client.get_workflow_handle(evolution_id).fetch_history()
        await REPLAYER.replay_workflow(history)
    runs = [w async for w in world.client.list_workflows(f'WorkflowId = "{loop.id}"')]
    assert len(runs) == 2  # continue-as-new: one run per evolution
    for run in runs:
        history = await world.client.get_workflow_handle(loop.id, run_id=run.run_id).fetch_history()
        await REPLAYER.replay_workflow(history)


async def running_evolution_handle(world: World) -> WorkflowHandle:
    for _ in range(150):
        with transaction(world.engine) as session:
            running = running_evolution(session, AGENT)
        if running is not None:
            return world.client.get_workflow_handle_for(EvolutionWorkflow.run, running.id)
        await asyncio.sleep(0.2)
    raise AssertionError("no evolution started")


async def test_the_tool_schema_operator_builds_the_candidate(world: World, workers) -> None:
    orders_window(world.engine)  # bare order numbers fail, "ORD-" ones succeed
    handle = await start(world, options().model_copy(update={"force": Action.TOOL_SCHEMA}))
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.6))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason
    with transaction(world.engine) as session:
        spec = get_version(session, status.candidate_version).spec
        build = get_evolution(session, handle.id).stages[0]
    parameter = spec.tools.tools["lookup_order"].parameters["properties"]["order_id"]
    assert parameter["pattern"] == r"^ORD-\d{6}$"
    assert build["stage"] == "build" and "12 of 12" in " ".join(build["changes"])


# -- when the chosen operator cannot help ------------------------------------------------

FACT = "The refund window is 30 days."
# The orders window is small; the policy's default minimum would make it a noop.
SMALL_WINDOW = PolicyConfig(min_trajectories=10)


def orders_the_tool_never_explains(engine) -> None:
    """Two order lookups that worked and ten the tool refused without saying what it wants:
    the tool schema is the change that fits, but there is no format to learn."""
    worked = [{"order_id": "ORD-100000"}, {"order_id": "ORD-100007"}]
    refused = [({"order_id": f"{200000 + i}"}, "order_id: invalid order id") for i in range(10)]
    record_window(
        engine, "lookup_order", LOOKUP_SCHEMA, worked, refused, description=LOOKUP_DESCRIPTION
    )


def refund_corrections(engine, count: int) -> None:
    """Answers users corrected with the same fact through /v1/feedback: memory's evidence."""
    base, rec, trajectories, rewards = utcnow(), Recorder(), [], []
    for index in range(count):
        at = base - timedelta(minutes=50 - index)
        corrected = trajectory(("acme", "globex")[index % 2], at, status=OutcomeStatus.FAILURE)
        call = rec.llm_call(corrected)
        trajectories.append(corrected)
        rewards += feedback(corrected, call, thumbs="down", correction=FACT)
    store(engine, trajectories, rec.events, rewards)


def decided() -> EvolutionOptions:
    """The policy decides (no force), on the small window, with fast gates."""
    return options().model_copy(update={"force": None, "policy": SMALL_WINDOW})


async def action_attribute(handle: WorkflowHandle) -> str | None:
    return (await handle.describe()).typed_search_attributes.get(ACTION)


async def test_when_the_chosen_operator_has_nothing_to_propose_the_next_best_is_promoted(
    world: World, workers
) -> None:
    """The user's case: tool_schema is the right call, but the window teaches it no format;
    the decision's next-best change, memory, aimed at the refund corrections,
    builds a candidate that goes through the gates and is promoted in the same evolution."""
    orders_the_tool_never_explains(world.engine)
    refund_corrections(world.engine, 6)
    parent = world.stable()
    handle = await start(world, decided())
    feeding = asyncio.create_task(feed_canary(world, handle, baseline=0.5, candidate=0.7))
    status = await handle.result()
    await feeding
    assert status.outcome is Outcome.PROMOTED, status.reason
    assert status.decision.action is Action.TOOL_SCHEMA  # what the policy chose, kept
    assert status.action is Action.MEMORY and await action_attribute(handle) == "memory"
    (tried,) = status.tried
    assert (tried.action, tried.outcome) == (Action.TOOL_SCHEMA, "nothing_to_propose")
    assert "only 2 successful calls of lookup_order" in tried.reason
    assert world.stable() == status.candidate_version != parent
    with transaction(world.engine) as session:
        candidate = get_version(session, status.candidate_version)
        ids = [uuid.UUID(item_id) for item_id in candidate.spec.memory.item_ids]
        remembered = [item.content for item in get_memory_items(session, AGENT, "acme", ids)]
        record = get_evolution(session, handle.id)
    assert any("refund window is 30 days" in content for content in remembered), remembered
    assert (record.action, record.outcome) == ("memory", "promoted")
    assert record.decision["action"] == "tool_schema"
    could_not, built, *gates = record.stages
    assert could_not == {"stage": "build", **tried.model_dump(mode="json")}
    assert built["stage"] == "build" and built["version"] == status.candidate_version
    assert [stage["gate"] for stage in gates] == ["replay", "shadow", "canary"]
    assert "memory, the next-best change (tool_schema had nothing to propose" in candidate.reason
    params = MlflowClient(workers.tracking_uri).get_run(status.mlflow_run_id).data.params
    assert params["tried.tool_schema"] == "nothing_to_propose"
    await REPLAYER.replay_workflow(await handle.fetch_history())


async def test_when_no_operator_can_help_the_evolution_ends_noop_with_every_reason(
    world: World, workers
) -> None:
    """Every change worth its price is tried, best first; none can build a candidate, so
    the evolution changes nothing, says why for each, and has not failed."""
    orders_the_tool_never_explains(world.engine)
    parent = world.stable()
    handle = await start(world, decided())
    status = await handle.result()
    assert status.outcome is Outcome.NOOP, status.reason
    assert [(t.action, t.outcome) for t in status.tried] == [
        (Action.TOOL_SCHEMA, "nothing_to_propose"),
        (Action.HARNESS, "operator_not_available"),  # this worker has no gateway
        (Action.MEMORY, "nothing_to_propose"),  # memory adds facts, not argument formats
    ]
    assert status.reason.startswith("noop: no operator could build a candidate: ")
    for tried in status.tried:
        assert tried.reason in status.reason
    assert "tool_schema had nothing to propose" in status.reason
    assert "harness is not available here" in status.reason
    assert status.candidate_version is None and world.stable() == parent
    with transaction(world.engine) as session:
        record = get_evolution(session, handle.id)
    assert record.outcome == "noop"
    stages = [dict(stage) for stage in record.stages]
    assert [stage.pop("stage") for stage in stages] == ["build"] * 3
    assert [TriedAction.model_validate(stage) for stage in stages] == status.tried
    await REPLAYER.replay_workflow(await handle.fetch_history())


HISTORIES = Path(__file__).parent / "histories"


@pytest.mark.parametrize("recorded", sorted(HISTORIES.glob("*.json")), ids=lambda path: path.stem)
async def test_histories_recorded_by_earlier_code_replay_as_they_ran(recorded: Path) -> None:
    """Each history was recorded by the code before a change in command order, and the
    change's `workflow.patched` marker keeps that path for it:

    - `...-before-fallbacks` (316a1c4): tool_schema had nothing to propose and the
      evolution failed (`fallback-actions`);
    - `...-before-ramp` (4dd53fe): canaries whose steps advanced only on a pass, one
      extended and promoted (with its holdback), one marginal to its last extension and
      rolled back (`canary-ramp`, `holdback-watch`);
    - `evolution-canary-ramp-asked-extended-promoted` and `holdback-answered` (the ramp's
      first commits): a two-step canary that asked a person, was extended and promoted,
      and the holdback it began, ended once answered; the next change in their command
      order needs a patch of its own.

    To record such a history: at that commit, run the evolution with the `world` and
    `workers` fixtures and save `(await handle.fetch_history()).to_json()`.
    """
    history = WorkflowHistory.from_json(recorded.stem, recorded.read_text())
    await REPLAYER.replay_workflow(history)
