"""Measuring a window: the `WindowStats` every evolution decision reads, from its records."""

from __future__ import annotations

import math
from contextlib import nullcontext
from datetime import datetime

from evolution.analysis.collector import collection_paused
from evolution.analysis.failures import failure_clusters
from evolution.analysis.procedures import procedure_failures
from evolution.analysis.rates import as_mean, as_rate, effective_rewards, task_success
from evolution.analysis.records import WindowRecords, read_window
from evolution.analysis.tool_errors import tool_failed
from evolution.analysis.trajectories import by_trajectory, task_type, tool_setup
from evolution.corrections import CorrectionJudge, read_corrections
from evolution.window import WindowSpec, WindowStats
from registry import Session

__all__ = ["analyse_window", "measure_window"]


def analyse_window(
    session: Session,
    spec: WindowSpec,
    *,
    now: datetime | None = None,
    judge: CorrectionJudge | None = None,
) -> WindowStats:
    """Measure the window `spec` names, from the registry, as of `now`.

    `judge` reads users' corrections with a model (see `evolution.corrections.judge`);
    without one they are read offline. An activity reads and measures apart, so that no
    transaction waits on the judge.

    Raises:
        registry.NotFoundError: the agent does not exist (a typo is not an empty window).
    """
    return measure_window(read_window(session, spec, now=now), judge=judge)


def measure_window(records: WindowRecords, *, judge: CorrectionJudge | None = None) -> WindowStats:
    """The window's statistics from its records; `judge` as in `analyse_window`.

    Read offline, the collector is paused as for the read (`collection_paused`); a model
    judge may take minutes, and its client's cycles are left to the collector."""
    with collection_paused() if judge is None else nullcontext():
        return _measured(records, judge)


def _measured(records: WindowRecords, judge: CorrectionJudge | None) -> WindowStats:
    trajectories, usage, tool_calls = records.trajectories, records.usage, records.tool_calls
    setups = {t.id: tool_setup(records.offered.get(t.id, ())) for t in trajectories}
    rewards = by_trajectory(records.rewards)
    corrections = read_corrections(
        trajectories, records.rewards, records.offered, records.turns, judge=judge
    )
    success = task_success(trajectories, rewards)
    cost = math.fsum(item.cost_usd for item in usage.values())
    llm_calls = sum(item.calls for item in usage.values())
    return WindowStats(
        spec=records.spec,
        since=records.since,
        until=records.until,
        stable_version=records.stable_version,
        trajectories=len(trajectories),
        sampled_from=records.sampled_from,
        sessions=len({(t.tenant, t.session) for t in trajectories}),
        llm_calls=llm_calls,
        tool_calls=len(tool_calls),
        tenants=sorted({t.tenant for t in trajectories}),
        task_types=sorted({task_type(t) for t in trajectories}),
        tool_setups=sorted(set(setups.values())),
        task_success=success,
        reward=as_mean(effective_rewards(trajectories, rewards)),
        correction_rate=as_rate(len(records.corrected), llm_calls),
        tool_error_rate=as_rate(sum(map(tool_failed, tool_calls)), len(tool_calls)),
        failures=failure_clusters(trajectories, setups, tool_calls, rewards, corrections),
        procedures=procedure_failures(trajectories, rewards, corrections, records.turns),
        cost_usd=cost,
        cost_per_success=cost / success.successes if success.successes else None,
        drift=records.drift,
        canary=records.canary,
        regression=records.regression,
    )
