"""A window's records: what its statistics are measured from, as the reader hands them over
(`activities.evidence.window.read_window` reads them in one go)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from atdp import Reward, RewardSource
from evolution.window import CanaryDelta, Drift, Regression, WindowSpec
from registry import ConversationTurn, LlmUsage, ToolCallRecord, UserTurn, WindowTrajectory

__all__ = ["WindowRecords", "correction_targets", "window_start"]

# Implicit next-turn rewards (proxy.signals) that say the user corrected or regenerated an
# answer, and the explicit feedback field that does the same.
_IMPLICIT_CORRECTION = "user_accepted"
_EXPLICIT_CORRECTION = "correction"


@dataclass(frozen=True)
class WindowRecords:
    """What a window's statistics are measured from, read in one go.

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


def window_start(
    spec: WindowSpec, trajectories: Sequence[WindowTrajectory], until: datetime
) -> datetime:
    """A time window starts at `since`; a count window at its oldest trajectory."""
    if spec.last is None:
        assert spec.since is not None  # WindowSpec requires since or last
        return spec.since
    if trajectories:
        return min(t.started_at for t in trajectories)
    return spec.since or until


def correction_targets(rewards: Mapping[uuid.UUID, list[Reward]]) -> dict[uuid.UUID, uuid.UUID]:
    """The events users corrected or regenerated, with their trajectories: those that are
    llm calls are the window's corrected answers (`WindowRecords.corrected`).

    Implicit next-turn signals (`user_accepted` false) and explicit corrections both count,
    when they name an event; a correction of a whole trajectory names none.
    """
    return {
        reward.event_id: reward.trajectory_id
        for items in rewards.values()
        for reward in items
        if reward.event_id is not None and _is_correction(reward)
    }


def _is_correction(reward: Reward) -> bool:
    if reward.source is RewardSource.IMPLICIT_NEXT_TURN and reward.name == _IMPLICIT_CORRECTION:
        return reward.numeric is not None and reward.numeric < 0.5
    return reward.source is RewardSource.EXPLICIT and reward.name == _EXPLICIT_CORRECTION
