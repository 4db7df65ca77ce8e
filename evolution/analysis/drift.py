"""Drift: how far the window's task-type mix moved from the window before."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from evolution.analysis.trajectories import task_type
from evolution.window import Drift, WindowSpec
from registry import TrajectoryWindow, WindowTrajectory

__all__ = ["jensen_shannon", "previous_window", "task_drift"]

_GROWN = 3


def jensen_shannon(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """The Jensen-Shannon divergence (base 2) of two mixes given as counts or weights.

    Symmetric, 0 for identical mixes, 1 for mixes with nothing in common.
    """
    p_total, q_total = math.fsum(p.values()), math.fsum(q.values())
    if p_total <= 0 or q_total <= 0:
        raise ValueError("jensen_shannon needs two non-empty mixes")
    terms = []
    for key in sorted(set(p) | set(q)):
        a, b = p.get(key, 0.0) / p_total, q.get(key, 0.0) / q_total
        middle = (a + b) / 2.0
        terms.append(_half_kl(a, middle) + _half_kl(b, middle))
    return min(1.0, max(0.0, math.fsum(terms)))


def _half_kl(share: float, middle: float) -> float:
    return 0.5 * share * math.log2(share / middle) if share > 0 else 0.0


def previous_window(
    spec: WindowSpec,
    window: TrajectoryWindow,
    trajectories: Sequence[WindowTrajectory],
    since: datetime,
    until: datetime,
) -> TrajectoryWindow:
    """The window before `window`: as long, or the previous `last`."""
    if spec.last is None:
        return window.model_copy(update={"since": since - (until - since), "until": since})
    return window.model_copy(update={"since": None, "skip": len(trajectories)})


def task_drift(
    before: Mapping[str | None, int], trajectories: Sequence[WindowTrajectory]
) -> Drift | None:
    """The task-type mix of `trajectories` against the window before's (`before`: its
    trajectories by task type, `registry.task_type_counts` of `previous_window`)."""
    previous = {key or "unknown": n for key, n in before.items()}
    now = Counter(task_type(t) for t in trajectories)
    if not previous or not now:
        return None
    return Drift(
        divergence=jensen_shannon(now, previous),
        previous_trajectories=sum(previous.values()),
        grown=_grown(now, previous),
    )


def _grown(now: Mapping[str, int], before: Mapping[str, int]) -> list[str]:
    now_total, before_total = sum(now.values()), sum(before.values())
    rises = {
        key: now[key] / now_total - before.get(key, 0) / before_total
        for key in now
        if now[key] / now_total > before.get(key, 0) / before_total
    }
    return sorted(rises, key=lambda key: (-rises[key], key))[:_GROWN]
