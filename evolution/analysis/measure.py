"""Measuring a window: the `WindowStats` every evolution decision reads, from its records."""

from __future__ import annotations

import math
from contextlib import nullcontext

from atdp import RewardSource
from evolution.analysis.collector import collection_paused
from evolution.analysis.failures import failure_clusters
from evolution.analysis.procedures import procedure_failures
from evolution.analysis.rates import as_mean, as_rate, effective_rewards, task_success
from evolution.analysis.records import WindowRecords
from evolution.analysis.tool_errors import tool_failed
from evolution.analysis.trajectories import by_trajectory, task_type, tool_setup
from evolution.corrections import CorrectionJudge, conversation_of, read_corrections
from evolution.followups import (
    FollowUp,
    JudgeReport,
    judged_follow_ups,
    read_follow_ups,
    signal_counts,
)
from evolution.window import FollowUpStats, WindowStats

__all__ = ["measure_window"]


def measure_window(records: WindowRecords, *, judge: CorrectionJudge | None = None) -> WindowStats:
    """The window's statistics from its records (`activities.evidence.read_window`).

    `judge` reads users' corrections with a model (see `evolution.corrections.judge`);
    without one they are read offline, with the collector paused as for the read
    (`collection_paused`); a model judge may take minutes, and its client's cycles are left
    to the collector. An activity reads and measures apart, so that no transaction waits
    on the judge."""
    with collection_paused() if judge is None else nullcontext():
        return _measured(records, judge)


def _measured(records: WindowRecords, judge: CorrectionJudge | None) -> WindowStats:
    trajectories, usage, tool_calls = records.trajectories, records.usage, records.tool_calls
    setups = {t.id: tool_setup(records.offered.get(t.id, ())) for t in trajectories}
    rewards = by_trajectory(records.rewards)
    follow_ups, report = _follow_ups(records, judge)
    corrections = read_corrections(
        trajectories, records.rewards, records.offered, records.turns, judge=judge,
        follow_ups=follow_ups, conversation=records.conversation,
    )  # fmt: skip
    success, evidence = task_success(trajectories, rewards, _heard(follow_ups))
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
        follow_ups=_follow_up_stats(follow_ups, len(trajectories), report),
        success_evidence=evidence,
    )


def _follow_ups(
    records: WindowRecords, judge: CorrectionJudge | None
) -> tuple[list[FollowUp], JudgeReport | None]:
    """The window's follow-ups, read offline, and by the agent's judge model where it has
    one and its verdicts agree with users' ratings (`judged_follow_ups`)."""
    task_types = {t.id: t.task_type or "" for t in records.trajectories}
    read = read_follow_ups(conversation_of(records.conversation), task_types)
    reader = getattr(judge, "follow_ups", None)
    if reader is None or not read:
        return read, None
    return judged_follow_ups(read, reader, _ratings(records))


def _ratings(records: WindowRecords) -> dict:
    """Users' explicit rating of each answer they rated (the latest)."""
    rated = {}
    for reward in records.rewards:
        if (
            reward.source is RewardSource.EXPLICIT
            and reward.event_id
            and reward.numeric is not None
        ):
            rated[reward.event_id] = reward.numeric
    return rated


def _heard(follow_ups: list[FollowUp]) -> dict:
    """What each trajectory's follow-ups said: False once one was dissatisfied, True when
    they only thanked."""
    heard: dict = {}
    for follow_up in follow_ups:
        if follow_up.dissatisfied:
            heard[follow_up.trajectory_id] = False
        elif follow_up.satisfied:
            heard.setdefault(follow_up.trajectory_id, True)
    return heard


def _follow_up_stats(
    follow_ups: list[FollowUp], trajectories: int, report: JudgeReport | None
) -> FollowUpStats:
    heard = _heard(follow_ups)
    return FollowUpStats(
        read=len(follow_ups),
        dissatisfied=as_rate(sum(not said for said in heard.values()), trajectories),
        satisfied=sum(heard.values()),
        signals=signal_counts(follow_ups),
        judge=report.reason if report else None,
        judge_agreement=report.agreement if report else None,
    )
