"""Rates and means with their intervals (`evolution.stats`): task success, reward."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from atdp import OutcomeStatus, Reward, RewardSource
from evolution.stats import mean_interval, wilson_interval
from evolution.window import Mean, Rate
from registry import WindowTrajectory, effective_reward

__all__ = [
    "as_mean",
    "as_rate",
    "effective_rewards",
    "success_judged",
    "task_succeeded",
    "task_success",
]

_TASK_SUCCESS = "task_success"
_FAILED_STATUSES = frozenset(
    {OutcomeStatus.FAILURE.value, OutcomeStatus.ERROR.value, OutcomeStatus.ABANDONED.value}
)


def as_rate(successes: int, total: int) -> Rate:
    low, high = wilson_interval(successes, total)
    return Rate(
        successes=successes,
        total=total,
        rate=successes / total if total else None,
        low=low,
        high=high,
    )


def as_mean(values: Sequence[float]) -> Mean:
    measured = mean_interval(values)
    if measured is None:
        return Mean(n=0, mean=None, low=None, high=None)
    mean, low, high = measured
    return Mean(n=len(values), mean=mean, low=low, high=high)


def task_succeeded(
    trajectory: WindowTrajectory, rewards: Sequence[Reward], heard: bool | None = None
) -> bool | None:
    """Whether the task succeeded: a `task_success` judgement first, else the outcome status,
    else what the user said of it (scores, thumbs, categories); None without any of them.

    The reward wins because it is the later, more specific evidence (a verifier or the
    agent's own report) and because later judgements supersede earlier ones there. Most
    users never report an outcome, but many rate an answer: that is evidence too; and many
    never rate, but write: `heard` is what their follow-ups said (False: one read as
    dissatisfied; True: they thanked), the last evidence.
    """
    return success_judged(trajectory, rewards, heard)[0]


def success_judged(
    trajectory: WindowTrajectory, rewards: Sequence[Reward], heard: bool | None = None
) -> tuple[bool | None, str | None]:
    """`task_succeeded`, and the evidence that decided it: "outcome", "rating" or
    "follow_up" (None when nothing did)."""
    judged = effective_reward(rewards, _TASK_SUCCESS)
    if judged is not None:
        return judged.value >= 0.5, "outcome"
    if trajectory.outcome_status == OutcomeStatus.SUCCESS.value:
        return True, "outcome"
    if trajectory.outcome_status in _FAILED_STATUSES:
        return False, "outcome"
    rated = effective_reward([r for r in rewards if r.source is RewardSource.EXPLICIT])
    if rated is not None:
        return rated.value >= 0.5, "rating"
    return heard, "follow_up" if heard is not None else None


def task_success(
    trajectories: Sequence[WindowTrajectory],
    rewards: Mapping[uuid.UUID, list[Reward]],
    heard: Mapping[uuid.UUID, bool] | None = None,
) -> tuple[Rate, dict[str, int]]:
    """Task success over the trajectories judged, and how many each kind of evidence
    judged (`heard`: what each trajectory's follow-ups said, where they said something)."""
    heard = heard or {}
    known = [success_judged(t, rewards.get(t.id, []), heard.get(t.id)) for t in trajectories]
    judged = [result for result, _ in known if result is not None]
    sources: dict[str, int] = {}
    for _, source in known:
        if source is not None:
            sources[source] = sources.get(source, 0) + 1
    return as_rate(sum(judged), len(judged)), sources


def effective_rewards(
    trajectories: Sequence[WindowTrajectory], rewards: Mapping[uuid.UUID, list[Reward]]
) -> list[float]:
    """One effective reward per trajectory that has any."""
    values = [effective_reward(rewards.get(t.id, [])) for t in trajectories]
    return [value.value for value in values if value is not None]
