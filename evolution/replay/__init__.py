"""Replay: re-run recorded trajectories on stable and on a candidate, and score both.

`replay_window` turns a window of recorded trajectories into the paired `ReplayCase`s that
`evolution.gates.judge_replay` judges. How a request is served is injected (`Serve`), so this
package never imports the gateway; see `evolution.replay.engine`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from atdp import Event
from evolution.gates import ReplayCase
from evolution.replay.engine import (
    AGENT_PROTOCOL,
    EVALUATION_HEADERS,
    SERVED_TOOLS,
    ReplayedTrajectory,
    ReplayMode,
    ReplayStep,
    Serve,
    ToolOutput,
    ToolResult,
    ToolSimulator,
    action_of,
    replay_trajectory,
    request_body,
    same_action,
    same_tool_calls,
)
from evolution.replay.mcp_tools import mcp_tool_simulator
from evolution.replay.scorers import (
    RecordedOutcome,
    ReplayScore,
    RequiredFacts,
    Scorer,
    ScoringContext,
    ToolCallsSucceeded,
    ToolCallsValid,
    combine,
    score_replay,
)
from evolution.replay.simulators import (
    ToolSimulatorError,
    ToolSimulatorSpec,
    http_tool_simulator,
    tenant_simulator,
)

__all__ = [
    "AGENT_PROTOCOL",
    "EVALUATION_HEADERS",
    "SERVED_TOOLS",
    "RecordedOutcome",
    "RecordedTrajectory",
    "ReplayMode",
    "ReplayScore",
    "ReplayStep",
    "ReplayedTrajectory",
    "RequiredFacts",
    "Scorer",
    "ScoringContext",
    "Serve",
    "ToolCallsSucceeded",
    "ToolCallsValid",
    "ToolOutput",
    "ToolResult",
    "ToolSimulator",
    "ToolSimulatorError",
    "ToolSimulatorSpec",
    "WindowReplay",
    "action_of",
    "combine",
    "http_tool_simulator",
    "mcp_tool_simulator",
    "replay_trajectory",
    "replay_window",
    "request_body",
    "same_action",
    "same_tool_calls",
    "score_replay",
    "tenant_simulator",
]


class RecordedTrajectory(NamedTuple):
    """One trajectory of the window: its events, whether it succeeded, and its tenant.

    `context` adds what scorers may use (reward, required facts); without it the context
    holds `recorded_success` only. A plain (events, recorded_success, tenant) tuple works too.
    """

    events: list[Event]
    recorded_success: bool
    tenant: str
    context: ScoringContext | None = None


class WindowReplay(BaseModel):
    """The paired cases for the replay gate, and the trajectories that could not be paired.

    `skipped` maps a trajectory id to why it has no case (a side without any opinion).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    cases: list[ReplayCase]
    skipped: dict[str, str] = Field(default_factory=dict)


async def replay_window(
    trajectories: Sequence[RecordedTrajectory | tuple],
    baseline: Serve,
    candidate: Serve,
    scorers: Sequence[Scorer],
    *,
    mode: ReplayMode = "approximate",
    tool_simulator: ToolSimulator | None = None,
    concurrency: int = 4,
    progress: Callable[[int, int], None] | None = None,
) -> WindowReplay:
    """Replay every trajectory on both versions, score both, and pair the scores.

    Args:
        concurrency: replays in flight at once (each side of a pair counts as one).
        progress: called with (done, total) after each trajectory, e.g. to heartbeat.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    items = [RecordedTrajectory(*item) for item in trajectories]
    slots = asyncio.Semaphore(concurrency)
    done = 0

    async def scored(item: RecordedTrajectory, serve: Serve) -> ReplayScore:
        async with slots:
            replayed = await replay_trajectory(
                item.events, serve, mode=mode, tool_simulator=tool_simulator
            )
        context = item.context or ScoringContext(recorded_success=item.recorded_success)
        return await score_replay(replayed, item.events, scorers, context)

    async def pair(item: RecordedTrajectory) -> tuple[ReplayScore, ReplayScore]:
        nonlocal done
        scores = await asyncio.gather(scored(item, baseline), scored(item, candidate))
        done += 1
        if progress is not None:
            progress(done, len(items))
        return scores[0], scores[1]

    pairs = await asyncio.gather(*(pair(item) for item in items))
    return _paired_cases(items, pairs)


def _paired_cases(
    items: list[RecordedTrajectory], pairs: Sequence[tuple[ReplayScore, ReplayScore]]
) -> WindowReplay:
    cases: list[ReplayCase] = []
    skipped: dict[str, str] = {}
    for item, (base, cand) in zip(items, pairs, strict=True):
        if base.combined is None or cand.combined is None:
            side = "stable" if base.combined is None else "the candidate"
            skipped[base.trajectory_id] = f"no scorer had an opinion on {side}'s replay"
            continue
        cases.append(
            ReplayCase(
                trajectory_id=base.trajectory_id,
                tenant=item.tenant,
                recorded_success=item.recorded_success,
                baseline_score=base.combined,
                candidate_score=cand.combined,
            )
        )
    return WindowReplay(cases=cases, skipped=skipped)
