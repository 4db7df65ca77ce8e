"""Many agents evolving at once: N evolutions started together against one Temporal worker
(then two), on the embedded stack.

Each agent is a scenario-suite agent whose world calls for a memory or tool-schema change
(the cheap operators: no RL, no DSPy), seeded with its scenario's traffic through the
gateway. All evolutions are started at once through the control API and followed to their
end, with live traffic during their shadow and canary gates, as the suite plays it. The
figures come from the workflows' histories: wall time, the most activities running at once
(overall and per worker: the slots used), how long activities and workflow tasks waited for
a worker, and any workflow task that timed out (a blocked event loop shows there first).

    python -m benchmarks.control_plane --agents 20 --workers 1,2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from evoplane.scenarios.catalog import by_name
from evoplane.scenarios.runner import AdminCLI, SuiteScale, Tenancy, _ScenarioRun
from evoplane.scenarios.upstream import ModelServer
from evoplane.settings import Settings, load_settings
from evoplane.simulation.progress import QuietReporter
from tests.support.intervals import most_at_once

# The suite's scenarios whose fix is a memory item or a tool-schema edit.
CHEAP = (
    "fact_shared",
    "fact_one_tenant",
    "fact_conflict",
    "tool_format_some",
    "tool_format_none",
    "renamed_parameter",
    "enum_values",
)
_ACTIVITY_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "completed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "failed",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "timed_out",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "canceled",
}


@dataclass
class RoundFigures:
    """One round: `agents` evolutions started at once against `workers` workers."""

    agents: int
    workers: int
    threads: int  # per worker, on evoplane-control
    seed_seconds: float = 0.0
    wall_seconds: float = 0.0  # the first start to the last end
    evolution_seconds_p50: float = 0.0
    evolution_seconds_max: float = 0.0
    outcomes: dict[str, int] = field(default_factory=dict)
    actions: dict[str, int] = field(default_factory=dict)
    activities: int = 0
    activity_ends: dict[str, int] = field(default_factory=dict)
    activity_retries: int = 0  # attempts after the first (a lost task shows here)
    most_activities_at_once: int = 0
    most_at_once_per_worker: dict[str, int] = field(default_factory=dict)
    activity_wait_p50: float = 0.0  # scheduled -> started, seconds
    activity_wait_max: float = 0.0
    workflow_tasks: int = 0
    workflow_task_wait_max: float = 0.0
    workflow_task_timeouts: int = 0
    workflow_task_failures: int = 0
    evolutions: list[dict[str, Any]] = field(default_factory=list)


def main() -> None:
    args = _arguments()
    os.environ["EVOPLANE_WORKER_ACTIVITY_THREADS"] = str(args.threads)
    settings = _settings(args.data_dir)
    figures = asyncio.run(_bench(settings, args))
    for round_ in figures:
        _print(round_)
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in figures], indent=2) + "\n")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20, help="evolutions started at once")
    parser.add_argument("--workers", default="1,2", help="worker counts, one round each")
    parser.add_argument(
        "--threads",
        type=int,
        default=load_settings().worker_activity_threads,
        help="EVOPLANE_WORKER_ACTIVITY_THREADS of each worker",
    )
    parser.add_argument("--seeding", type=int, default=4, help="agents seeded at once")
    parser.add_argument("--data-dir", type=Path, default=Path(f"/tmp/ctlbench-{os.getpid()}"))
    parser.add_argument("--json", type=Path, help="write the figures here")
    return parser.parse_args()


def _settings(data_dir: Path) -> Settings:
    """The embedded stack in a fresh data dir, on free ports (the machine is shared)."""
    ports = ("temporal_port", "temporal_ui_port", "mlflow_port", "gateway_port", "api_port")
    return load_settings(data_dir=data_dir, **{name: _free_port() for name in ports})


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def _bench(settings: Settings, args: argparse.Namespace) -> list[RoundFigures]:
    from evoplane.simulation.stack import stack
    from evoplane.worker import connect

    counts = sorted({int(count) for count in args.workers.split(",")})
    figures = []
    extra: list[Any] = []  # the workers started beside the stack's own
    started = time.monotonic()
    with stack(settings, started=lambda name: _say(started, f"{name} is up")) as endpoints:
        client = await connect(settings)
        env = {
            "EVOPLANE_DATA_DIR": str(settings.data_dir),
            "EVOPLANE_DATABASE_URL": settings.registry_url,
        }
        models: dict = {}
        try:
            with ModelServer(models) as server:
                tenancy = Tenancy(AdminCLI(env), uuid.uuid4().hex[:4])
                for count in counts:
                    while len(extra) < count - 1:
                        extra.append(_start_worker(settings, len(extra) + 2))
                        _say(started, f"worker {len(extra) + 1} is up")
                    plays = [
                        _play(endpoints, server, tenancy, models, index, count)
                        for index in range(args.agents)
                    ]
                    round_ = RoundFigures(args.agents, count, args.threads)
                    since = await asyncio.to_thread(_seed, plays, args.seeding, round_, started)
                    ids, seconds = await asyncio.to_thread(
                        _evolve_all, plays, since, round_, started
                    )
                    histories = [await client.get_workflow_handle(i).fetch_history() for i in ids]
                    _measure(round_, histories, seconds)
                    figures.append(round_)
        finally:
            for service in extra:
                service.process.stop()
    return figures


def _play(endpoints, server, tenancy, models, index: int, workers: int) -> _ScenarioRun:
    """Agent `index` of the round: the next cheap scenario's world, under a name of its own."""
    (scenario,) = by_name([CHEAP[index % len(CHEAP)]])
    run = f"{tenancy.run}w{workers}a{index}"
    return _ScenarioRun(
        scenario, endpoints, server, tenancy, models, run, index, _SCALE, QuietReporter()
    )


# The suite's gates; one live session at a time per agent (twenty agents share two cores).
_SCALE = SuiteScale(concurrency=1)


def _start_worker(settings: Settings, number: int):
    """Another `evoplane worker` on the same Temporal, registry and MLflow."""
    from evoplane.stack.launcher import start_service
    from evoplane.stack.services import worker_service

    own = settings.model_copy(
        update={
            "data_dir": settings.data_dir / f"worker{number}",
            "database_url": settings.registry_url,
        }
    )
    service = worker_service(own)
    start_service(service)
    return service


def _seed(
    plays: list[_ScenarioRun], at_once: int, round_: RoundFigures, started: float
) -> list[datetime]:
    """Create each agent and play its scenario's sessions.

    Returns where each agent's window starts."""
    began = time.monotonic()

    def seed(play: _ScenarioRun) -> datetime:
        since = datetime.now(UTC)
        play._setup()
        play._traffic(play.scenario.sessions, "seed")
        return since

    for play in plays:  # one at a time: worlds share tenants, each created once
        for base in play.tenants:
            play.tenancy.key(base)
    with ThreadPoolExecutor(at_once) as pool:
        since = list(pool.map(seed, plays))
    round_.seed_seconds = round(time.monotonic() - began, 1)
    _say(started, f"{len(plays)} agents seeded in {round_.seed_seconds:.0f}s")
    return since


def _evolve_all(
    plays: list[_ScenarioRun], since: list[datetime], round_: RoundFigures, started: float
) -> tuple[list[str], list[float]]:
    """Start every evolution at once, then follow each to its end (live traffic included).

    Returns the evolutions' ids and how long each took."""
    with ThreadPoolExecutor(len(plays)) as pool:
        began = time.monotonic()
        ids = list(pool.map(_start, plays, since))
        _say(started, f"{len(ids)} evolutions started in {time.monotonic() - began:.1f}s")
        ended = list(pool.map(_follow, plays, ids))
    round_.wall_seconds = round(max(end for end, _ in ended) - began, 1)
    lives = [live for _, live in ended]
    round_.evolutions = [
        {
            "agent": play.agent,
            "action": live.get("action"),
            "outcome": live.get("outcome"),
            "reason": live.get("reason"),
            "seconds": round(end - began, 1),
        }
        for play, (end, live) in zip(plays, ended, strict=True)
    ]
    round_.outcomes = dict(Counter(str(live.get("outcome")) for live in lives))
    round_.actions = dict(Counter(str(live.get("action")) for live in lives))
    _say(started, f"all ended in {round_.wall_seconds:.0f}s: {round_.outcomes}")
    for play in plays:
        play.control.close()
    return ids, [end - began for end, _ in ended]


def _start(play: _ScenarioRun, since: datetime) -> str:
    return play.control.evolve(play.agent, play._options(since))["id"]


def _follow(play: _ScenarioRun, evolution_id: str) -> tuple[float, dict[str, Any]]:
    live = play._follow(evolution_id)
    return time.monotonic(), live


def _measure(round_: RoundFigures, histories: list[WorkflowHistory], seconds: list[float]) -> None:
    """The round's figures from the workflows' histories."""
    round_.evolution_seconds_p50 = round(statistics.median(seconds), 1)
    round_.evolution_seconds_max = round(max(seconds), 1)
    spans, waits, ends, task_waits = [], [], Counter(), []
    for history in histories:
        events = {event.event_id: event for event in history.events}
        for event in history.events:
            kind = event.event_type
            if kind in _ACTIVITY_CLOSED:
                attributes = _attributes(event)
                start = events[attributes.started_event_id]
                scheduled = events[attributes.scheduled_event_id]
                worker = start.activity_task_started_event_attributes.identity
                round_.activity_retries += start.activity_task_started_event_attributes.attempt - 1
                spans.append((worker, _time(start), _time(event)))
                waits.append(_time(start) - _time(scheduled))
                ends[_ACTIVITY_CLOSED[kind]] += 1
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                scheduled = events[event.workflow_task_started_event_attributes.scheduled_event_id]
                task_waits.append(_time(event) - _time(scheduled))
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                round_.workflow_task_timeouts += 1
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                round_.workflow_task_failures += 1
    round_.activities = len(spans)
    round_.activity_ends = dict(ends)
    round_.most_activities_at_once = most_at_once([(a, b) for _, a, b in spans])
    for worker in sorted({worker for worker, _, _ in spans}):
        held = [(a, b) for w, a, b in spans if w == worker]
        round_.most_at_once_per_worker[worker] = most_at_once(held)
    round_.activity_wait_p50 = round(statistics.median(waits), 3) if waits else 0.0
    round_.activity_wait_max = round(max(waits, default=0.0), 3)
    round_.workflow_tasks = len(task_waits)
    round_.workflow_task_wait_max = round(max(task_waits, default=0.0), 3)


def _attributes(event):
    return getattr(event, event.WhichOneof("attributes"))


def _time(event) -> float:
    return event.event_time.ToDatetime().timestamp()


def _say(started: float, text: str) -> None:
    print(f"[{time.monotonic() - started:6.0f}s] {text}", flush=True)


def _print(round_: RoundFigures) -> None:
    print(f"\n{round_.agents} agents, {round_.workers} worker(s) x {round_.threads} threads")
    for name, value in asdict(round_).items():
        if name == "evolutions":
            continue
        print(f"  {name:28} {value}")


if __name__ == "__main__":
    main()
