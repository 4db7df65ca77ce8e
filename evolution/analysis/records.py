"""Reading a window: the records its statistics are measured from, read in one go."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from atdp import EventKind, Reward, RewardSource, utcnow
from evolution.analysis.collector import collection_paused
from evolution.analysis.drift import task_drift
from evolution.analysis.tool_errors import distinct_tool_calls
from evolution.analysis.trajectories import by_trajectory
from evolution.analysis.versions import canary_delta, holdback_at, stable_regression
from evolution.window import CanaryDelta, Drift, Regression, WindowSpec, trajectory_window
from registry import (
    SAMPLE_SPACE,
    ConversationTurn,
    LlmUsage,
    Session,
    ToolCallRecord,
    TrajectoryWindow,
    UserTurn,
    WindowTrajectory,
    aliases_at,
    conversation_turns,
    count_trajectories,
    follow_up_turns,
    get_agent,
    llm_usage,
    no_jit,
    offered_tools,
    rewarded_events,
    tool_call_records,
    window_rewards,
    window_trajectories,
)

__all__ = ["SAMPLE_CAP", "WindowRecords", "read_window"]

# A time window with more trajectories than this is measured on a uniform sample of about
# this many (registry.windows: by the random tail of their ids), so reading and measuring
# a busy agent's day costs what a few hours of it would; rates over 10,000 trajectories
# are within about a point of the whole window's.
SAMPLE_CAP = 10_000

# Implicit next-turn rewards (proxy.signals) that say the user corrected or regenerated an
# answer, and the explicit feedback field that does the same.
_IMPLICIT_CORRECTION = "user_accepted"
_EXPLICIT_CORRECTION = "correction"
# Tool call ids that do not identify one call (/v1/events' default, an unmatched result).


@dataclass(frozen=True)
class WindowRecords:
    """What a window's statistics are measured from, read in one go (`read_window`).

    The version comparisons (drift, canary, regression) are read whole; the rest are the
    window's light records, measured by `measure_window`.
    """

    spec: WindowSpec
    since: datetime
    until: datetime
    stable_version: str | None
    trajectories: list[WindowTrajectory]
    sampled_from: int | None  # the window's trajectories, when these are a sample of them
    offered: dict[uuid.UUID, set[str]]
    rewards: list[Reward]
    usage: dict[uuid.UUID, LlmUsage]
    tool_calls: list[ToolCallRecord]
    corrected: dict[uuid.UUID, uuid.UUID]
    turns: list[UserTurn]
    conversation: list[ConversationTurn]
    drift: Drift | None
    canary: CanaryDelta | None
    regression: Regression | None


def read_window(
    session: Session, spec: WindowSpec, *, now: datetime | None = None, cap: int | None = SAMPLE_CAP
) -> WindowRecords:
    """The records of the window `spec` names, as of `now`; of a uniform sample of about
    `cap` of its trajectories when a time window holds more (None: never sampled). The
    version comparisons (drift, canary, regression) are read whole.

    Raises:
        registry.NotFoundError: the agent does not exist (a typo is not an empty window).
    """
    with collection_paused():
        return _read_window(session, spec, now=now, cap=cap)


def _read_window(
    session: Session, spec: WindowSpec, *, now: datetime | None, cap: int | None
) -> WindowRecords:
    get_agent(session, spec.agent)
    no_jit(session)
    until = spec.until or now or utcnow()
    window = trajectory_window(spec, until=until)
    holdback = holdback_at(session, spec.agent, until)
    if spec.version_id is None:
        # The sessions a holdback keeps on the replaced version are a yardstick for the
        # regression check, not the traffic an evolution of stable would change.
        window = window.model_copy(update={"held_back": holdback})
    sampled_from = None
    if cap is not None and spec.last is None:
        # Counted in SQL first, so a large window's trajectories are never all read.
        held = count_trajectories(session, window)
        if held > cap:
            sampled_from = held
            window = window.model_copy(update={"sample": max(1, SAMPLE_SPACE * cap // held)})
    trajectories = window_trajectories(session, window)
    since = _window_start(spec, trajectories, until)
    rewards = window_rewards(session, window)
    aliases = aliases_at(session, spec.agent, until)
    return WindowRecords(
        spec=spec,
        since=since,
        until=until,
        stable_version=aliases.stable,
        trajectories=trajectories,
        sampled_from=sampled_from,
        offered=offered_tools(session, window),
        rewards=rewards,
        usage=llm_usage(session, window),
        tool_calls=distinct_tool_calls(tool_call_records(session, window)),
        corrected=_corrected_calls(session, window, by_trajectory(rewards)),
        turns=follow_up_turns(session, window),
        conversation=conversation_turns(session, window),
        drift=task_drift(session, spec, window, trajectories, since, until),
        canary=canary_delta(session, spec, aliases, since, until),
        regression=stable_regression(session, spec, until, holdback),
    )


def _window_start(
    spec: WindowSpec, trajectories: Sequence[WindowTrajectory], until: datetime
) -> datetime:
    """A time window starts at `since`; a count window at its oldest trajectory."""
    if spec.last is None:
        assert spec.since is not None  # WindowSpec requires since or last
        return spec.since
    if trajectories:
        return min(t.started_at for t in trajectories)
    return spec.since or until


def _corrected_calls(
    session: Session, window: TrajectoryWindow, rewards: Mapping[uuid.UUID, list[Reward]]
) -> dict[uuid.UUID, uuid.UUID]:
    """The llm calls a user corrected or regenerated, with their trajectories.

    Implicit next-turn signals (`user_accepted` false) and explicit corrections both count,
    when they name an llm_call event; a correction of a whole trajectory names no call.
    """
    targets = {
        reward.event_id: reward.trajectory_id
        for items in rewards.values()
        for reward in items
        if reward.event_id is not None and _is_correction(reward)
    }
    answers = rewarded_events(session, window, EventKind.LLM_CALL) if targets else set()
    return {
        event_id: trajectory_id
        for event_id, trajectory_id in targets.items()
        if event_id in answers
    }


def _is_correction(reward: Reward) -> bool:
    if reward.source is RewardSource.IMPLICIT_NEXT_TURN and reward.name == _IMPLICIT_CORRECTION:
        return reward.numeric is not None and reward.numeric < 0.5
    return reward.source is RewardSource.EXPLICIT and reward.name == _EXPLICIT_CORRECTION
