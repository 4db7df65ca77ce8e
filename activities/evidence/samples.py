"""Reading a live gate's look: what the baseline and the candidate served since it began."""

from __future__ import annotations

from atdp import EventKind, Traffic
from evolution.samples import GateTraffic, Served, gate_window, pre_gate_window
from evolution.window import WindowSpec
from registry import (
    Session,
    TrajectoryWindow,
    WindowTrajectory,
    rewards_by_trajectory,
    window_events,
    window_trajectories,
)

__all__ = ["canary_traffic", "shadow_traffic"]


def canary_traffic(
    session: Session, spec: WindowSpec, baseline: str, candidate: str
) -> GateTraffic:
    """The user trajectories each version served in the window, with their llm calls and
    rewards, and the baseline's before it (`evolution.samples.canary_metrics`)."""
    earlier = pre_gate_window(spec, baseline)
    before = None if earlier is None else window_trajectories(session, earlier)
    return GateTraffic(
        _served(session, gate_window(spec, baseline, Traffic.USER), rewarded=True),
        _served(session, gate_window(spec, candidate, Traffic.USER), rewarded=True),
        None if before is None else Served(before, rewards=_rewards(session, before)),
    )


def shadow_traffic(
    session: Session, spec: WindowSpec, baseline: str, candidate: str
) -> GateTraffic:
    """The baseline's user trajectories and the candidate's shadow copies of the same
    period's traffic, with their llm calls (`evolution.samples.shadow_metrics`)."""
    return GateTraffic(
        _served(session, gate_window(spec, baseline, Traffic.USER)),
        _served(session, gate_window(spec, candidate, Traffic.SHADOW)),
    )


def _served(session: Session, window: TrajectoryWindow, *, rewarded: bool = False) -> Served:
    trajectories = window_trajectories(session, window)
    calls = window_events(session, window, EventKind.LLM_CALL)
    return Served(trajectories, calls, _rewards(session, trajectories) if rewarded else {})


def _rewards(session: Session, trajectories: list[WindowTrajectory]) -> dict:
    return rewards_by_trajectory(session, [t.id for t in trajectories])
