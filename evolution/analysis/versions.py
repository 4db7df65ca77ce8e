"""Versions compared on the same traffic: canary against stable, stable against its parent.

Which versions and spans are compared is decided here, from the alias moves; the reader
(`activities.evidence.window`) reads each span's trajectories and rewards and hands them
back as effective rewards by version (`version_rewards`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from atdp import Reward
from evolution.analysis.rates import as_mean
from evolution.analysis.trajectories import by_trajectory
from evolution.window import (
    CanaryDelta,
    Mean,
    Regression,
    RegressionDesign,
    WindowSpec,
    trajectory_window,
)
from registry import AliasMove, AliasState, TrajectoryWindow, WindowTrajectory, effective_reward

__all__ = [
    "Promotion",
    "RegressionPlan",
    "Span",
    "canary_delta",
    "canary_window",
    "holdback_at",
    "last_promotion",
    "regression",
    "regression_plan",
    "served_window",
    "version_rewards",
]


@dataclass(frozen=True)
class Promotion:
    """The current stable, the version it replaced, and when."""

    version_id: str
    parent_id: str
    at: datetime


@dataclass(frozen=True)
class Span:
    """What one version served over [since, until)."""

    version_id: str
    since: datetime
    until: datetime


@dataclass(frozen=True)
class RegressionPlan:
    """The stable and its parent, each over the span it is judged on."""

    promotion: Promotion
    design: RegressionDesign
    current: Span
    parent: Span


def version_rewards(
    trajectories: Iterable[WindowTrajectory], rewards: Iterable[Reward]
) -> dict[str | None, list[float]]:
    """Effective reward of each trajectory that has one, by serving version."""
    by_id = by_trajectory(rewards)
    values: dict[str | None, list[float]] = defaultdict(list)
    for trajectory in trajectories:
        value = effective_reward(by_id.get(trajectory.id, []))
        if value is not None:
            values[trajectory.version_id].append(value.value)
    return values


def _delta(new: Mean, old: Mean) -> float | None:
    return new.mean - old.mean if new.mean is not None and old.mean is not None else None


def canary_window(
    spec: WindowSpec, aliases: AliasState, since: datetime, until: datetime
) -> TrajectoryWindow | None:
    """Stable's and the canary's traffic over the window's time span (the version filter
    aside); None without a canary."""
    if aliases.canary is None or aliases.stable is None:
        return None
    return served_window(spec, (aliases.stable, aliases.canary), since, until)


def canary_delta(aliases: AliasState, values: dict[str | None, list[float]]) -> CanaryDelta:
    """Canary against stable, from the rewards of `canary_window` (`version_rewards`)."""
    assert aliases.stable is not None and aliases.canary is not None  # see canary_window
    stable, canary = as_mean(values[aliases.stable]), as_mean(values[aliases.canary])
    return CanaryDelta(
        stable_version=aliases.stable,
        canary_version=aliases.canary,
        weight=aliases.canary_weight,
        stable=stable,
        canary=canary,
        delta=_delta(canary, stable),
    )


def regression_plan(
    promotion: Promotion, holdback: tuple[str, datetime] | None, until: datetime
) -> RegressionPlan:
    """The current stable since its promotion against its parent.

    On the same traffic when the parent has been held back since the promotion (a share of
    new sessions stays on it): that comparison is immune to drift in what users ask.
    Otherwise the parent just before the promotion, over an equally long period, so a
    weekly rhythm in the traffic weighs on both alike, but a drift that came with the
    promotion weighs on the stable alone. A holdback with too few rewards yet confirms
    nothing; the before/after comparison is not used in its place.

    `holdback`: the holdback running at `until` (`holdback_at`), if any.
    """
    version_id, parent_id, promoted_at = promotion.version_id, promotion.parent_id, promotion.at
    if holdback is not None and holdback[0] == parent_id and holdback[1] >= promoted_at:
        held_since = holdback[1]
        current = Span(version_id, held_since, until)
        parent = Span(parent_id, held_since, until)
        return RegressionPlan(promotion, RegressionDesign.HOLDBACK, current, parent)
    span = until - promoted_at
    current = Span(version_id, promoted_at, until)
    parent = Span(parent_id, promoted_at - span, promoted_at)
    return RegressionPlan(promotion, RegressionDesign.BEFORE_AFTER, current, parent)


def regression(plan: RegressionPlan, current: Mean, parent: Mean) -> Regression:
    """The plan's comparison, from each span's mean effective reward."""
    return Regression(
        version_id=plan.promotion.version_id,
        parent_id=plan.promotion.parent_id,
        promoted_at=plan.promotion.at,
        current=current,
        parent=parent,
        delta=_delta(current, parent),
        design=plan.design,
    )


def holdback_at(moves: Sequence[AliasMove], until: datetime) -> tuple[str, datetime] | None:
    """(the held-back version, since when) as of `until`, from the holdback alias's moves;
    None if no holdback runs then."""
    found = _latest_pointing(moves, until)
    if found is None:
        return None
    moves, start = found
    return moves[start].version_id, moves[start].at


def last_promotion(moves: Sequence[AliasMove], until: datetime) -> Promotion | None:
    """The promotion behind stable as of `until`, from the stable alias's moves; None if
    the version it points at replaced none."""
    found = _latest_pointing(moves, until)
    if found is None:
        return None
    moves, start = found
    if start == 0 or moves[start - 1].version_id is None:
        return None
    return Promotion(moves[start].version_id, moves[start - 1].version_id, moves[start].at)


def _latest_pointing(
    history: Sequence[AliasMove], until: datetime
) -> tuple[list[AliasMove], int] | None:
    """An alias's moves up to `until`, and the index of the first of the trailing moves that
    point where it points at `until` (re-pointing an alias at its version changes nothing);
    None if it points nowhere then."""
    moves = [m for m in history if m.at <= until]
    if not moves or moves[-1].version_id is None:
        return None
    start = len(moves) - 1
    while start > 0 and moves[start - 1].version_id == moves[-1].version_id:
        start -= 1
    return moves, start


def served_window(
    spec: WindowSpec, version_ids: tuple[str, ...], since: datetime, until: datetime
) -> TrajectoryWindow:
    """The spec's agent and tenants over [since, until), as these versions served them."""
    update = {"version_ids": version_ids, "since": since, "until": until, "last": None}
    return trajectory_window(spec, until=until).model_copy(update=update)
