"""A weight evolution's training job survives its worker: killed mid-run, it resumes from the
last checkpoint (not from zero) on the next worker, as its heartbeats and evidence show."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from temporalio.client import WorkflowHandle

from activities.models import EvolutionRequest, Stage
from atdp import (
    ChatMessage,
    MessageAction,
    ModelRef,
    Observation,
    ToolCall,
    ToolSpec,
    VersionRefs,
    VersionSpec,
)
from evolution.decision import Action
from evoplane.demo.tiny import TinyModelSpec, init_tiny
from registry import (
    Alias,
    add_rewards,
    get_evolution,
    insert_events,
    record_trajectory,
    register_version,
    set_alias,
    transaction,
)
from tests.registry.helpers import event, reward, trajectory
from tests.workflows.conftest import AGENT, TENANTS, World
from tests.workflows.test_durability import kill, start_worker
from tests.workflows.test_evolution import options, wait_for
from workflows.evolution import EvolutionWorkflow
from workflows.naming import evolution_workflow_id
from workflows.queues import CONTROL_QUEUE

pytestmark = [pytest.mark.temporal, pytest.mark.slow]

STEPS, EVERY = 60, 5
TRAINING = {
    "steps": STEPS,
    "checkpoint_every": EVERY,
    "prompts_per_step": 2,
    "group_size": 4,
    "max_new_tokens": 24,
    "holdout": 0.25,
    "threads": 1,
}
TOOLS = [ToolSpec(name=name, parameters={"type": "object"}) for name in ("lookup", "refund")]


def local_stable(world: World, tmp_path) -> str:
    """The agent on the tiny model (local engine), trained with small, frequent checkpoints."""
    checkpoint = init_tiny(tmp_path / "tiny", TinyModelSpec(seed=0))
    spec = VersionSpec(model=ModelRef(engine="local", checkpoint=str(checkpoint), model="tiny"))
    with transaction(world.engine) as session:
        version = register_version(
            session, AGENT, spec, parent_id=world.stable(), author="test", reason="local"
        ).id
        set_alias(session, AGENT, Alias.STABLE, version, actor="test")
    with world.engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE agent SET settings = :settings"),
            {"settings": json.dumps({"training": TRAINING})},
        )
    return version


def record_tool_calls(world: World, version: str, count: int) -> None:
    """Recorded llm_calls that called a tool with a thumbs up: prompts with references."""
    with transaction(world.engine) as session:
        for i in range(count):
            served = trajectory(TENANTS[i % len(TENANTS)], session=uuid.uuid4().hex)
            served = served.model_copy(update={"versions": VersionRefs(agent_version_id=version)})
            record_trajectory(session, served)
            name = ("lookup", "refund")[i % 2]
            call = event(
                served,
                0,
                observation=Observation(
                    messages=[ChatMessage(role="user", content=f"{name} order {i}")], tools=TOOLS
                ),
                action=MessageAction(
                    tool_calls=[ToolCall(id=f"c{i}", name=name, arguments="{}")],
                    token_ids=[60, 61],
                    logprobs=[-1.0, -1.0],
                ),
            )
            insert_events(session, [call])
            add_rewards(session, [reward(served, 1.0, call)])


async def start_weights_evolution(world: World) -> WorkflowHandle:
    forced = options().model_copy(update={"force": Action.WEIGHTS})
    return await world.client.start_workflow(
        EvolutionWorkflow.run,
        EvolutionRequest(agent=AGENT, options=forced),
        id=evolution_workflow_id(AGENT, datetime.now(UTC)),
        task_queue=CONTROL_QUEUE,
        execution_timeout=timedelta(minutes=5),
    )


def checkpoint_steps(directory: Path) -> list[int]:
    """The complete checkpoints a job has written (a partial one is a dot directory)."""
    return sorted(int(p.name.removeprefix("step-")) for p in directory.glob("step-*"))


async def test_a_killed_training_job_resumes_from_its_last_checkpoint(world: World, tmp_path):
    version = local_stable(world, tmp_path)
    record_tool_calls(world, version, 12)
    first = start_worker(world, tmp_path / "data")
    try:
        handle = await start_weights_evolution(world)
        checkpoints = tmp_path / "data" / "checkpoints" / AGENT / handle.id
        deadline = asyncio.get_running_loop().time() + 120
        while max(checkpoint_steps(checkpoints), default=0) < 2 * EVERY:
            assert asyncio.get_running_loop().time() < deadline, "no checkpoint was written"
            await asyncio.sleep(0.1)
        kill(first)
    except BaseException:
        kill(first)
        raise
    written = max(checkpoint_steps(checkpoints))
    assert written < STEPS, "the job finished before it could be killed"
    second = start_worker(world, tmp_path / "data")
    try:
        # The retry starts once the heartbeat timeout (30 s) notices the dead worker.
        await wait_for(
            handle,
            lambda s: s.stage not in (Stage.DECIDING, Stage.BUILDING) or s.outcome is not None,
            seconds=150,
        )
    finally:
        kill(second)
        await handle.terminate("the test checks the build only")
    with transaction(world.engine) as session:
        record = get_evolution(session, handle.id)
    (build,) = [stage for stage in record.stages if stage.get("stage") == "build"]
    evidence = build["evidence"]
    # Resumed from the newest checkpoint the killed attempt wrote, not from zero.
    assert evidence["resumed_from_step"] >= written >= 2 * EVERY
    assert evidence["resumed_from_step"] % EVERY == 0 and evidence["steps"] == STEPS
    # The retry saw the killed attempt's heartbeat details: the job was not started afresh.
    assert "step" in evidence["previous_attempt_heartbeat"]
    candidate = record.candidate_version_id
    assert candidate is not None and candidate != version
    history = await handle.fetch_history()
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "train_policy should have been retried after the kill"


async def test_training_steps_and_the_checkpoint_are_tracked_in_mlflow(
    world: World, workers, tmp_path
) -> None:
    from mlflow import MlflowClient

    from activities.tracking import CHECKPOINT_TAG, VERSION_TAG, model_name

    version = local_stable(world, tmp_path)
    with world.engine.begin() as connection:
        connection.execute(
            sa.text("UPDATE agent SET settings = :settings"),
            {"settings": json.dumps({"training": {**TRAINING, "steps": 6, "checkpoint_every": 3}})},
        )
    record_tool_calls(world, version, 12)
    handle = await start_weights_evolution(world)
    try:
        status = await wait_for(
            handle,
            lambda s: s.candidate_version is not None and s.stage != Stage.BUILDING,
            seconds=120,
        )
    finally:
        await handle.terminate("the test checks the build only")
    mlflow = MlflowClient(workers.tracking_uri)
    history = mlflow.get_metric_history(status.mlflow_run_id, "train_reward")
    assert sorted(m.step for m in history) == [1, 2, 3, 4, 5, 6]
    assert len(mlflow.get_metric_history(status.mlflow_run_id, "train_kl")) == 6
    run = mlflow.get_run(status.mlflow_run_id)
    assert "heldout_reward_before" in run.data.metrics
    assert "heldout_reward_after" in run.data.metrics
    # The decision's algorithm (the window is all successes and no corrections: GRPO) and
    # what it trained on.
    assert run.data.params["algorithm"] == "grpo"
    assert 0 < run.data.metrics["data_prompts"] <= 12
    # The trained checkpoint is a model version of the agent's registered model.
    registered = mlflow.search_model_versions(f"name='{model_name(AGENT)}'")
    (trained,) = [v for v in registered if v.run_id == status.mlflow_run_id]  # its run's
    assert trained.tags[VERSION_TAG] == status.candidate_version
    assert trained.tags[CHECKPOINT_TAG].endswith("/final")
    aliases = mlflow.get_model_version(model_name(AGENT), trained.version).aliases
    assert aliases == [f"evoplane-{status.candidate_version.rpartition('@')[2]}"]


def record_corrections(world: World, version: str, count: int) -> None:
    """Sessions where the user corrects a wrong call (the gateway's next-turn signal) and the
    agent's next answer, the right call, is rated up: what DPO pairs are made of."""
    from atdp import BinaryValue, RewardSource

    with transaction(world.engine) as session:
        for i in range(count):
            served = trajectory(TENANTS[i % len(TENANTS)], session=uuid.uuid4().hex)
            served = served.model_copy(update={"versions": VersionRefs(agent_version_id=version)})
            record_trajectory(session, served)
            asked = ChatMessage(role="user", content=f"money back for order {i}")
            wrong = event(
                served,
                0,
                observation=Observation(messages=[asked], tools=TOOLS),
                action=MessageAction(tool_calls=[ToolCall(id="w", name="lookup", arguments="{}")]),
            )
            said = ChatMessage(role="user", content="no, I asked for a refund")
            correcting = event(
                served,
                1,
                kind="user_message",
                parent_id=wrong.id,
                observation=Observation(messages=[said]),
            )
            right = event(
                served,
                2,
                observation=Observation(messages=[asked, said], tools=TOOLS),
                action=MessageAction(tool_calls=[ToolCall(id="r", name="refund", arguments="{}")]),
            )
            insert_events(session, [wrong, correcting, right])
            signal = reward(
                served, 0.0, wrong, name="user_accepted", source=RewardSource.IMPLICIT_NEXT_TURN
            ).model_copy(update={"value": BinaryValue(value=False)})
            add_rewards(session, [signal, reward(served, 1.0, right)])


async def corrected_build(
    world: World, tmp_path, training: dict, dpo_min_corrections: int = 5
) -> tuple[Any, Any]:
    """A forced weights evolution on six corrected sessions, with these training settings:
    its record and its status once the candidate is built."""
    from evolution.decision import PolicyConfig

    version = local_stable(world, tmp_path)
    with world.engine.begin() as connection:
        small = {**TRAINING, "steps": 4, "checkpoint_every": 2, "holdout": 0.0, **training}
        connection.execute(
            sa.text("UPDATE agent SET settings = :settings"),
            {"settings": json.dumps({"training": small})},
        )
    record_corrections(world, version, 6)
    policy = PolicyConfig(dpo_min_corrections=dpo_min_corrections)
    forced = options(policy=policy).model_copy(update={"force": Action.WEIGHTS})
    handle = await world.client.start_workflow(
        EvolutionWorkflow.run,
        EvolutionRequest(agent=AGENT, options=forced),
        id=evolution_workflow_id(AGENT, datetime.now(UTC)),
        task_queue=CONTROL_QUEUE,
        execution_timeout=timedelta(minutes=5),
    )
    try:
        status = await wait_for(
            handle,
            lambda s: s.candidate_version is not None and s.stage != Stage.BUILDING,
            seconds=120,
        )
    finally:
        await handle.terminate("the test checks the build only")
    with transaction(world.engine) as session:
        return get_evolution(session, handle.id), status


def build_evidence(record: Any) -> dict:
    (build,) = [stage for stage in record.stages if stage.get("stage") == "build"]
    return build["evidence"]


async def test_corrections_make_the_decision_train_dpo_on_their_pairs(
    world: World, workers, tmp_path
) -> None:
    from mlflow import MlflowClient

    record, status = await corrected_build(world, tmp_path, {})
    assert record.decision["algorithm"] == "dpo"
    assert record.decision["algorithm_reason"].startswith("6 answers were corrected")
    evidence = build_evidence(record)
    # Each correction's pair, and the six rewarded calls beside them as demonstrations.
    assert evidence["algorithm"] == "dpo"
    assert evidence["data"] == {"pairs": 6, "demonstrations": 6}
    assert evidence["objective"] == "dpo"
    run = MlflowClient(workers.tracking_uri).get_run(status.mlflow_run_id)
    assert run.data.params["algorithm"] == "dpo" and run.data.metrics["data_pairs"] == 6
    assert run.data.metrics["data_demonstrations"] == 6


async def test_corrections_and_a_local_teacher_train_on_policy_distillation(
    world: World, workers, tmp_path
) -> None:
    from mlflow import MlflowClient

    teacher = init_tiny(tmp_path / "teacher", TinyModelSpec(seed=1))  # the same tokenizer
    record, status = await corrected_build(world, tmp_path, {"distill_from": str(teacher)})
    assert record.decision["algorithm"] == "distill"
    assert "a teacher scores the student's own tokens" in record.decision["algorithm_reason"]
    evidence = build_evidence(record)
    # The six corrected answers have no rewarded reference, and distillation trains on them.
    assert evidence["algorithm"] == evidence["objective"] == "distill"
    assert evidence["data"] == {"prompts": 12, "unreferenced": 6}
    run = MlflowClient(workers.tracking_uri).get_run(status.mlflow_run_id)
    assert run.data.params["algorithm"] == "distill"
    assert run.data.metrics["data_unreferenced"] == 6


async def test_a_judge_without_measured_agreement_is_refused_and_the_record_says_so(
    world: World, workers, tmp_path
) -> None:
    from mlflow import MlflowClient

    judge = {"base_url": world.upstream.base_url, "model": "scripted-model", "min_pairs": 1}
    # Too few corrections for DPO: GRPO on the rewarded calls, where a judge may help.
    record, status = await corrected_build(
        world, tmp_path, {"judge": judge}, dpo_min_corrections=100
    )
    evidence = build_evidence(record)
    assert evidence["algorithm"] == "grpo" and evidence["data"] == {"prompts": 6}
    # No two recorded answers to one request differ in reward: nothing to measure it on.
    assert evidence["judge"]["used"] is False and evidence["judge"]["pairs"] == 0
    assert evidence["judge"]["reason"] == (
        "refused on 6 prompts without a rewarded reference: only 0 recorded pairs with "
        "different explicit rewards to measure it on (at least 1 needed)"
    )
    run = MlflowClient(workers.tracking_uri).get_run(status.mlflow_run_id)
    assert run.data.params["judge_used"] == "false"
