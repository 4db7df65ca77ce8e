"""Per-trajectory samples of live traffic, the input of the shadow and canary judges.

A canary step compares trajectories the candidate served with trajectories stable served
over the same period: effective reward (higher is better) and errors (critical). A shadow
step has no user feedback (its answers are never shown), so it is judged on what can be
read off the answer itself: upstream errors and malformed tool calls.
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Session, select

from atdp import Event
from evolution.gates import MetricSamples, Sample
from registry import effective_reward, rewards_by_trajectory
from registry.tables import EventRow, TrajectoryRow

__all__ = ["canary_metrics", "shadow_metrics"]

_ERROR_STATUSES = {"error"}


def _trajectories(
    session: Session,
    agent: str,
    version_id: str,
    since: datetime,
    until: datetime | None,
    tenants: list[str] | None,
    traffic: str,
) -> list[TrajectoryRow]:
    """Trajectories of `version_id` started in [since, until) whose events are `traffic`."""
    has_traffic = sa.exists().where(
        EventRow.trajectory_id == TrajectoryRow.id, EventRow.traffic == traffic
    )
    statement = select(TrajectoryRow).where(
        TrajectoryRow.agent == agent,
        TrajectoryRow.version_id == version_id,
        TrajectoryRow.started_at >= since,
        has_traffic,
    )
    if until is not None:
        statement = statement.where(TrajectoryRow.started_at < until)
    if tenants:
        statement = statement.where(TrajectoryRow.tenant.in_(tenants))
    return list(session.exec(statement.order_by(TrajectoryRow.started_at)))


def _reward_samples(session: Session, rows: list[TrajectoryRow]) -> list[Sample]:
    rewards = rewards_by_trajectory(session, [row.id for row in rows])
    samples = []
    for row in rows:
        reward = effective_reward(rewards.get(row.id, []))
        if reward is not None:
            samples.append(Sample(tenant=row.tenant, value=reward.value, key=str(row.id)))
    return samples


def _events(session: Session, rows: list[TrajectoryRow], kind: str) -> dict[uuid.UUID, list]:
    ids = [row.id for row in rows]
    found: dict[uuid.UUID, list[Event]] = defaultdict(list)
    for start in range(0, len(ids), 500):
        statement = select(EventRow).where(
            EventRow.trajectory_id.in_(ids[start : start + 500]), EventRow.kind == kind
        )
        for row in session.exec(statement):
            found[row.trajectory_id].append(Event.model_validate(row.body))
    return found


def _failed(event: Event) -> bool:
    outcome = event.outcome
    finish = getattr(event.action, "finish_reason", None)
    return bool(outcome and (outcome.error_class or outcome.success is False)) or finish == "error"


def _error_samples(session: Session, rows: list[TrajectoryRow]) -> list[Sample]:
    """1 for a trajectory with an upstream or tool error, else 0."""
    calls = _events(session, rows, "llm_call")
    return [
        Sample(
            tenant=row.tenant,
            value=float(row.outcome_status in _ERROR_STATUSES or any(map(_failed, calls[row.id]))),
            key=str(row.id),
        )
        for row in rows
    ]


def _tool_call_valid(event: Event) -> bool:
    """Every tool call the model made names an offered tool and carries JSON object args."""
    offered = {tool.name for tool in (event.observation.tools if event.observation else [])}
    for call in getattr(event.action, "tool_calls", None) or []:
        if offered and call.name not in offered:
            return False
        try:
            if not isinstance(json.loads(call.arguments or "{}"), dict):
                return False
        except json.JSONDecodeError:
            return False
    return True


def _validity_samples(session: Session, rows: list[TrajectoryRow]) -> list[Sample]:
    calls = _events(session, rows, "llm_call")
    return [
        Sample(tenant=row.tenant, value=float(all(map(_tool_call_valid, calls[row.id]))))
        for row in rows
        if calls[row.id]
    ]


def canary_metrics(
    session: Session,
    agent: str,
    baseline: str,
    candidate: str,
    since: datetime,
    *,
    until: datetime | None = None,
    tenants: list[str] | None = None,
) -> list[MetricSamples]:
    """Effective reward and error rate of user trajectories, baseline vs candidate."""
    base = _trajectories(session, agent, baseline, since, until, tenants, "user")
    cand = _trajectories(session, agent, candidate, since, until, tenants, "user")
    return [
        MetricSamples(
            name="reward",
            baseline=_reward_samples(session, base),
            candidate=_reward_samples(session, cand),
        ),
        _errors(session, base, cand),
    ]


def shadow_metrics(
    session: Session,
    agent: str,
    baseline: str,
    candidate: str,
    since: datetime,
    *,
    until: datetime | None = None,
    tenants: list[str] | None = None,
) -> list[MetricSamples]:
    """The candidate's shadow answers vs stable's live answers to the same period's traffic."""
    base = _trajectories(session, agent, baseline, since, until, tenants, "user")
    cand = _trajectories(session, agent, candidate, since, until, tenants, "shadow")
    return [
        _errors(session, base, cand),
        MetricSamples(
            name="tool_call_valid",
            baseline=_validity_samples(session, base),
            candidate=_validity_samples(session, cand),
        ),
    ]


def _errors(session: Session, base: Iterable, cand: Iterable) -> MetricSamples:
    return MetricSamples(
        name="error_rate",
        baseline=_error_samples(session, list(base)),
        candidate=_error_samples(session, list(cand)),
        higher_is_better=False,
    )
