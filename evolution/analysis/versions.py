"""Versions compared on the same traffic: canary against stable, stable against its parent."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

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
from registry import (
    Alias,
    AliasMove,
    AliasState,
    Session,
    TrajectoryWindow,
    alias_history,
    effective_reward,
    window_rewards,
    window_trajectories,
)

__all__ = ["canary_delta", "holdback_at", "stable_regression"]


def _version_rewards(session: Session, window: TrajectoryWindow) -> dict[str | None, list[float]]:
    """Effective reward of each trajectory in the window that has one, by serving version."""
    rewards = by_trajectory(window_rewards(session, window))
    values: dict[str | None, list[float]] = defaultdict(list)
    for trajectory in window_trajectories(session, window):
        value = effective_reward(rewards.get(trajectory.id, []))
        if value is not None:
            values[trajectory.version_id].append(value.value)
    return values


def _delta(new: Mean, old: Mean) -> float | None:
    return new.mean - old.mean if new.mean is not None and old.mean is not None else None


def canary_delta(
    session: Session, spec: WindowSpec, aliases: AliasState, since: datetime, until: datetime
) -> CanaryDelta | None:
    """Canary against stable over the window's time span (the version filter aside)."""
    if aliases.canary is None or aliases.stable is None:
        return None
    window = _served_window(spec, (aliases.stable, aliases.canary), since, until)
    values = _version_rewards(session, window)
    stable, canary = as_mean(values[aliases.stable]), as_mean(values[aliases.canary])
    return CanaryDelta(
        stable_version=aliases.stable,
        canary_version=aliases.canary,
        weight=aliases.canary_weight,
        stable=stable,
        canary=canary,
        delta=_delta(canary, stable),
    )


def stable_regression(
    session: Session, spec: WindowSpec, until: datetime, holdback: tuple[str, datetime] | None
) -> Regression | None:
    """The current stable since its promotion against its parent.

    On the same traffic when the parent has been held back since the promotion (a share of
    new sessions stays on it): that comparison is immune to drift in what users ask.
    Otherwise the parent just before the promotion, over an equally long period, so a
    weekly rhythm in the traffic weighs on both alike, but a drift that came with the
    promotion weighs on the stable alone. A holdback with too few rewards yet confirms
    nothing; the before/after comparison is not used in its place.

    `holdback`: the holdback running at `until` (`holdback_at`), if any.
    """
    promotion = _last_promotion(session, spec.agent, until)
    if promotion is None:
        return None
    version_id, parent_id, promoted_at = promotion
    if holdback is not None and holdback[0] == parent_id and holdback[1] >= promoted_at:
        held_since = holdback[1]
        current = _served_mean(session, spec, version_id, held_since, until)
        parent = _served_mean(session, spec, parent_id, held_since, until)
        design = RegressionDesign.HOLDBACK
    else:
        span = until - promoted_at
        current = _served_mean(session, spec, version_id, promoted_at, until)
        parent = _served_mean(session, spec, parent_id, promoted_at - span, promoted_at)
        design = RegressionDesign.BEFORE_AFTER
    return Regression(
        version_id=version_id,
        parent_id=parent_id,
        promoted_at=promoted_at,
        current=current,
        parent=parent,
        delta=_delta(current, parent),
        design=design,
    )


def holdback_at(session: Session, agent: str, until: datetime) -> tuple[str, datetime] | None:
    """(the held-back version, since when) as of `until`; None if no holdback runs then."""
    found = _latest_pointing(session, agent, Alias.HOLDBACK, until)
    if found is None:
        return None
    moves, start = found
    return moves[start].version_id, moves[start].at


def _last_promotion(
    session: Session, agent: str, until: datetime
) -> tuple[str, str, datetime] | None:
    """(stable, the version it replaced, when) as of `until`; None if it replaced none."""
    found = _latest_pointing(session, agent, Alias.STABLE, until)
    if found is None:
        return None
    moves, start = found
    if start == 0 or moves[start - 1].version_id is None:
        return None
    return moves[start].version_id, moves[start - 1].version_id, moves[start].at


def _latest_pointing(
    session: Session, agent: str, alias: Alias, until: datetime
) -> tuple[list[AliasMove], int] | None:
    """An alias's moves up to `until`, and the index of the first of the trailing moves that
    point where it points at `until` (re-pointing an alias at its version changes nothing);
    None if it points nowhere then."""
    moves = [m for m in alias_history(session, agent, alias) if m.at <= until]
    if not moves or moves[-1].version_id is None:
        return None
    start = len(moves) - 1
    while start > 0 and moves[start - 1].version_id == moves[-1].version_id:
        start -= 1
    return moves, start


def _served_mean(
    session: Session, spec: WindowSpec, version_id: str, since: datetime, until: datetime
) -> Mean:
    if until <= since:
        return as_mean([])
    window = _served_window(spec, (version_id,), since, until)
    return as_mean(_version_rewards(session, window)[version_id])


def _served_window(
    spec: WindowSpec, version_ids: tuple[str, ...], since: datetime, until: datetime
) -> TrajectoryWindow:
    """The spec's agent and tenants over [since, until), as these versions served them."""
    update = {"version_ids": version_ids, "since": since, "until": until, "last": None}
    return trajectory_window(spec, until=until).model_copy(update=update)
