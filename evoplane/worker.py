"""Temporal workers: wire the workflows and activities to a client, a registry and MLflow.

Every worker serves `evoplane-control` (orchestration and light activities). A worker
started with `gpu=True` also serves `evoplane-gpu` (training and heavy evaluation); on a
machine without CUDA that worker takes tiny-model jobs only.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import signal
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import TLSConfig
from temporalio.worker import Worker

from activities.evolution import EvolutionActivities
from activities.replay_gate import ReplayGate
from activities.review import ReviewActivities
from activities.scorers import ScorerActivities
from activities.training import TrainingActivities
from evolution.replay import ToolSimulator
from evoplane.settings import Settings, SettingsError
from registry import check_schema, create_db_engine
from workflows.evolution import EvolutionWorkflow
from workflows.holdback import HoldbackWorkflow
from workflows.loop import EvolutionLoop
from workflows.queues import CONTROL_QUEUE, GPU_QUEUE
from workflows.rollback import RollbackWorkflow
from workflows.scoring import ScoringWorkflow

__all__ = [
    "WORKFLOWS",
    "activity_executor",
    "connect",
    "run_workers",
    "temporal_tls",
    "workers_for",
]

log = logging.getLogger(__name__)

WORKFLOWS = [EvolutionWorkflow, RollbackWorkflow, EvolutionLoop, HoldbackWorkflow, ScoringWorkflow]
# How long activities in flight may take to finish once a worker is asked to stop (within
# Kubernetes' default 30 s grace period); a training job's checkpoints make the rest cheap.
SHUTDOWN_GRACE = timedelta(seconds=20)
_DEFAULT_SLOTS: int = Settings.model_fields["worker_activity_threads"].default


async def connect(settings: Settings) -> Client:
    """A client with the pydantic converter every Evoplane workflow and activity expects."""
    api_key = settings.temporal_api_key
    return await Client.connect(
        settings.temporal_target,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
        tls=temporal_tls(settings),
        api_key=api_key.get_secret_value() if api_key else None,
    )


def temporal_tls(settings: Settings) -> TLSConfig | bool:
    """The TLS the Temporal connection uses: False (plain), True (the system's CAs), or a
    config with the CA and client certificate files the settings name.

    Raises:
        SettingsError: a certificate without its key (or the reverse), or a file that
            cannot be read.
    """
    if bool(settings.temporal_tls_cert) != bool(settings.temporal_tls_key):
        raise SettingsError(
            "temporal_tls_cert and temporal_tls_key go together (mTLS needs both); set "
            "EVOPLANE_TEMPORAL_TLS_CERT and EVOPLANE_TEMPORAL_TLS_KEY, or neither"
        )
    files = {
        "server_root_ca_cert": settings.temporal_tls_ca,
        "client_cert": settings.temporal_tls_cert,
        "client_private_key": settings.temporal_tls_key,
    }
    if not any(files.values()):
        return settings.temporal_tls or settings.temporal_api_key is not None
    read: dict[str, bytes | None] = {}
    for name, path in files.items():
        try:
            read[name] = path.read_bytes() if path else None
        except OSError as error:
            raise SettingsError(f"cannot read the Temporal TLS file {path}: {error}") from None
    return TLSConfig(**read)


def _tracker(settings: Settings):
    from activities.tracking import EvolutionTracker

    return EvolutionTracker(settings.tracking_uri, temporal_ui_url=settings.temporal_ui_link)


def activity_executor(settings: Settings, *, gpu: bool) -> ThreadPoolExecutor:
    """The threads synchronous activities run in, so none blocks the worker's event loop:
    one per evoplane-control activity slot, and one for the GPU queue's training job."""
    threads = settings.worker_activity_threads + (1 if gpu else 0)
    return ThreadPoolExecutor(threads, thread_name_prefix="evoplane-activity")


def workers_for(
    client: Client,
    activities: EvolutionActivities,
    executor: ThreadPoolExecutor,
    *,
    gpu: bool,
    training: TrainingActivities | None = None,
    slots: int = _DEFAULT_SLOTS,
    scorers: ScorerActivities | None = None,
    review: ReviewActivities | None = None,
) -> list[Worker]:
    """The control worker, and the GPU worker (RL training jobs) when asked for.

    Args:
        slots: control activities taken at once; `executor` needs a thread for each (see
            `activity_executor`), else a task taken waits for a thread while its timeouts run.
        scorers, review: the code scorers' and the review queue's activities (default: on
            the evolution activities' registry and tracker).
    """
    # (a stand-in for the evolution activities may hold neither registry nor tracker)
    engine, tracker = getattr(activities, "engine", None), getattr(activities, "tracker", None)
    scorers = scorers or ScorerActivities(engine)
    review = review or ReviewActivities(engine, tracker)
    methods = [
        activities.begin,
        activities.decide,
        activities.build_candidate,
        activities.register_candidate,
        activities.replay_gate,
        activities.judge_live,
        activities.judge_holdback,
        activities.end_holdback,
        activities.record_stage,
        activities.move_alias,
        activities.rollback,
        activities.finish,
        scorers.score_traffic,
        review.queue_for_review,
    ]
    workers = [
        Worker(
            client,
            task_queue=CONTROL_QUEUE,
            workflows=WORKFLOWS,
            activities=methods,
            activity_executor=executor,
            max_concurrent_activities=slots,
            graceful_shutdown_timeout=SHUTDOWN_GRACE,
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
                graceful_shutdown_timeout=SHUTDOWN_GRACE,
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
    scorers = ScorerActivities(engine)
    review = ReviewActivities(engine, activities.tracker)
    training = TrainingActivities(
        engine,
        activities.tracker,
        settings.data_dir.resolve() / "checkpoints",
        device=settings.local_device,
    )
    client = await connect(settings)
    stop = _stop_on_signals()
    slots = settings.worker_activity_threads
    with activity_executor(settings, gpu=gpu) as executor:
        workers = workers_for(
            client,
            activities,
            executor,
            gpu=gpu,
            training=training,
            slots=slots,
            scorers=scorers,
            review=review,
        )
        queues = ", ".join(w.task_queue for w in workers)
        log.info(
            "worker serving %s at %s (%d activities at once)",
            queues,
            settings.temporal_target,
            slots,
        )
        running = asyncio.gather(*(worker.run() for worker in workers))
        stopping = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if stop.is_set():
                log.info(
                    "stopping: polling ends, activities in flight have %.0fs to finish "
                    "(Temporal retries the rest on another worker)",
                    SHUTDOWN_GRACE.total_seconds(),
                )
                await asyncio.gather(*(worker.shutdown() for worker in workers))
            await running
        finally:
            stopping.cancel()
            await replay.aclose()
            scorers.close()
            engine.dispose()
    log.info("worker stopped")


def _stop_on_signals() -> asyncio.Event:
    """Set on SIGTERM (a service manager, Kubernetes) or SIGINT (Ctrl-C)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
