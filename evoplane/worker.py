"""Temporal workers: wire the workflows and activities to a client, a registry and MLflow.

Every worker serves `evoplane-control` (orchestration and light activities). A worker
started with `gpu=True` also serves `evoplane-gpu` (training and heavy evaluation); on a
machine without CUDA that worker takes tiny-model jobs only.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker

from activities.evolution import EvolutionActivities
from activities.replay import ReplayGate
from activities.training import TrainingActivities
from evolution.replay import ToolSimulator
from evoplane.settings import Settings, SettingsError
from registry import check_schema, create_db_engine
from workflows.evolution import EvolutionWorkflow
from workflows.loop import EvolutionLoop
from workflows.queues import CONTROL_QUEUE, GPU_QUEUE
from workflows.rollback import RollbackWorkflow

__all__ = ["WORKFLOWS", "connect", "run_workers", "workers_for"]

log = logging.getLogger(__name__)

WORKFLOWS = [EvolutionWorkflow, RollbackWorkflow, EvolutionLoop]


async def connect(settings: Settings) -> Client:
    """A client with the pydantic converter every Evoplane workflow and activity expects."""
    return await Client.connect(
        settings.temporal_target,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
    )


def _tracker(settings: Settings):
    from activities.tracking import EvolutionTracker

    return EvolutionTracker(settings.tracking_uri, temporal_ui_url=settings.temporal_ui_url)


def workers_for(
    client: Client,
    activities: EvolutionActivities,
    executor: ThreadPoolExecutor,
    *,
    gpu: bool,
    training: TrainingActivities | None = None,
) -> list[Worker]:
    """The control worker, and the GPU worker (RL training jobs) when asked for."""
    methods = [
        activities.begin,
        activities.decide,
        activities.build_candidate,
        activities.register_candidate,
        activities.replay_gate,
        activities.judge_live,
        activities.record_stage,
        activities.move_alias,
        activities.rollback,
        activities.finish,
    ]
    workers = [
        Worker(
            client,
            task_queue=CONTROL_QUEUE,
            workflows=WORKFLOWS,
            activities=methods,
            activity_executor=executor,
        )
    ]
    if gpu:
        if training is None:
            raise ValueError("a GPU worker needs TrainingActivities for train_policy")
        workers.append(
            Worker(
                client,
                task_queue=GPU_QUEUE,
                activities=[training.train_policy],
                activity_executor=executor,
                max_concurrent_activities=1,  # one training job per device
            )
        )
    return workers


def load_tool_simulators(path: str | None) -> dict[str, ToolSimulator]:
    """The simulators named by EVOPLANE_TOOL_SIMULATORS ("package.module:MAPPING")."""
    if not path:
        return {}
    module_name, _, attribute = path.partition(":")
    try:
        simulators = getattr(importlib.import_module(module_name), attribute or "SIMULATORS")
    except (ImportError, AttributeError) as error:
        raise SettingsError(
            f"EVOPLANE_TOOL_SIMULATORS={path!r} cannot be loaded ({error}); give "
            "'package.module:MAPPING', a dict from simulator name to a callable"
        ) from error
    if not isinstance(simulators, Mapping) or not all(map(callable, simulators.values())):
        raise SettingsError(
            f"EVOPLANE_TOOL_SIMULATORS={path!r} is not a mapping from name to a callable"
        )
    return dict(simulators)


async def run_workers(settings: Settings, *, gpu: bool, tracking: bool = True) -> None:
    """Run until cancelled (Ctrl-C)."""
    engine = create_db_engine(settings.registry_url)
    check_schema(engine)
    upstream_key = (
        settings.upstream_api_key.get_secret_value() if settings.upstream_api_key else None
    )
    replay = ReplayGate(
        engine,
        upstream_api_key=upstream_key,
        simulators=load_tool_simulators(settings.tool_simulators),
        threads=settings.local_threads,
    )
    activities = EvolutionActivities(
        engine,
        _tracker(settings) if tracking else None,
        replay,
        gateway_url=settings.gateway_api,
        upstream_api_key=upstream_key,
    )
    training = TrainingActivities(
        engine,
        activities.tracker,
        settings.data_dir.resolve() / "checkpoints",
        device=settings.local_device,
    )
    client = await connect(settings)
    with ThreadPoolExecutor(max_workers=8) as executor:
        workers = workers_for(client, activities, executor, gpu=gpu, training=training)
        queues = ", ".join(w.task_queue for w in workers)
        log.info("worker serving %s at %s", queues, settings.temporal_target)
        try:
            await asyncio.gather(*(worker.run() for worker in workers))
        finally:
            await replay.aclose()
            engine.dispose()
