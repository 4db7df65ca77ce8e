"""Reading a window: the records its statistics are measured from, read in one go."""

from __future__ import annotations

import uuid
from datetime import datetime

from atdp import EventKind, utcnow
from evolution.analysis.collector import collection_paused
from evolution.analysis.drift import previous_window, task_drift
from evolution.analysis.rates import as_mean
from evolution.analysis.records import WindowRecords, correction_targets, window_start
from evolution.analysis.tool_errors import distinct_tool_calls
from evolution.analysis.trajectories import by_trajectory
from evolution.analysis.versions import (
    Span,
    canary_delta,
    canary_window,
    holdback_at,
    last_promotion,
    regression,
    regression_plan,
    served_window,
    version_rewards,
)
from evolution.window import CanaryDelta, Mean, Regression, WindowSpec, trajectory_window
from registry import (
    SAMPLE_SPACE,
    Alias,
    AliasState,
    Session,
    TrajectoryWindow,
    alias_history,
    aliases_at,
    conversation_turns,
    count_trajectories,
    follow_up_turns,
    get_agent,
    llm_usage,
    no_jit,
    offered_tools,
    rewarded_events,
    task_type_counts,
    tool_call_records,
    window_rewards,
    window_trajectories,
)

__all__ = ["SAMPLE_CAP", "read_window"]

# A time window with more trajectories than this is measured on a uniform sample of about
# this many (registry.windows: by the random tail of their ids), so reading and measuring
# a busy agent's day costs what a few hours of it would; rates over 10,000 trajectories
# are within about a point of the whole window's.
SAMPLE_CAP = 10_000


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
    holdback = holdback_at(alias_history(session, spec.agent, Alias.HOLDBACK), until)
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
    since = window_start(spec, trajectories, until)
    rewards = window_rewards(session, window)
    aliases = aliases_at(session, spec.agent, until)
    before = task_type_counts(session, previous_window(spec, window, trajectories, since, until))
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
        corrected=_corrected_calls(session, window, correction_targets(by_trajectory(rewards))),
        turns=follow_up_turns(session, window),
        conversation=conversation_turns(session, window),
        drift=task_drift(before, trajectories),
        canary=_canary(session, spec, aliases, since, until),
        regression=_regression(session, spec, until, holdback),
    )


def _corrected_calls(
    session: Session, window: TrajectoryWindow, targets: dict[uuid.UUID, uuid.UUID]
) -> dict[uuid.UUID, uuid.UUID]:
    """The corrections' targets that are llm calls: the answers users corrected."""
    answers = rewarded_events(session, window, EventKind.LLM_CALL) if targets else set()
    return {event: trajectory for event, trajectory in targets.items() if event in answers}


def _canary(
    session: Session, spec: WindowSpec, aliases: AliasState, since: datetime, until: datetime
) -> CanaryDelta | None:
    window = canary_window(spec, aliases, since, until)
    return None if window is None else canary_delta(aliases, _version_rewards(session, window))


def _regression(
    session: Session, spec: WindowSpec, until: datetime, holdback: tuple[str, datetime] | None
) -> Regression | None:
    promotion = last_promotion(alias_history(session, spec.agent, Alias.STABLE), until)
    if promotion is None:
        return None
    plan = regression_plan(promotion, holdback, until)
    current = _served_mean(session, spec, plan.current)
    return regression(plan, current, _served_mean(session, spec, plan.parent))


def _served_mean(session: Session, spec: WindowSpec, span: Span) -> Mean:
    if span.until <= span.since:
        return as_mean([])
    window = served_window(spec, (span.version_id,), span.since, span.until)
    return as_mean(_version_rewards(session, window)[span.version_id])


def _version_rewards(session: Session, window: TrajectoryWindow) -> dict[str | None, list[float]]:
    return version_rewards(window_trajectories(session, window), window_rewards(session, window))
