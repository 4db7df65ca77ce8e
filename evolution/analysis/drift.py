"""Drift: how far the window's task-type mix moved from the window before."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from evolution.analysis.trajectories import task_type
from evolution.window import Drift, WindowSpec
from registry import Session, TrajectoryWindow, WindowTrajectory, task_type_counts

__all__ = ["jensen_shannon", "task_drift"]

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


def task_drift(
    session: Session,
    spec: WindowSpec,
    window: TrajectoryWindow,
    trajectories: Sequence[WindowTrajectory],
    since: datetime,
    until: datetime,
) -> Drift | None:
    """The task-type mix against the window before: same length, or the previous `last`."""
    if spec.last is None:
        previous = window.model_copy(update={"since": since - (until - since), "until": since})
    else:
        previous = window.model_copy(update={"since": None, "skip": len(trajectories)})
    before = {key or "unknown": n for key, n in task_type_counts(session, previous).items()}
    now = Counter(task_type(t) for t in trajectories)
    if not before or not now:
        return None
    return Drift(
        divergence=jensen_shannon(now, before),
        previous_trajectories=sum(before.values()),
        grown=_grown(now, before),
    )


def _grown(now: Mapping[str, int], before: Mapping[str, int]) -> list[str]:
    now_total, before_total = sum(now.values()), sum(before.values())
    rises = {
        key: now[key] / now_total - before.get(key, 0) / before_total
        for key in now
        if now[key] / now_total > before.get(key, 0) / before_total
    }
    return sorted(rises, key=lambda key: (-rises[key], key))[:_GROWN]
