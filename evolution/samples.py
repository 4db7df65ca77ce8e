"""Per-trajectory samples of live traffic, the input of the shadow and canary judges.

A canary step compares trajectories the candidate served with trajectories stable served
over the same period: effective reward (higher is better) and errors (critical). Each
reward sample carries its tenant's success before the gate (stable's mean reward over its
last trajectories before the window) as a covariate, which the judge uses to take the
between-tenant spread out of its interval (CUPED). A shadow
step has no user feedback (its answers are never shown), so it is judged on what can be
read off the answer itself: upstream errors and malformed tool calls.

Many users never rate and never report an outcome: they complain when an answer fails them
(the gateway records a next turn that denies or asks again as an implicit 0) and say
nothing when it served them. So in a canary a served trajectory that carries no reward at
all counts as accepted (1.0) once its last answer is older than the gate's
`silence_seconds`: without that, a version whose users only ever complain could never be
shown better than another. A trajectory answered more recently may still be complained
about, and is left out of the look: counted as accepted, sessions in flight would dilute
both sides towards 1, and favour the slower version.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from atdp import Event, EventKind, Traffic
from evolution.gates import MetricSamples, Sample
from evolution.window import WindowSpec, trajectory_window
from registry import (
    Session,
    WindowTrajectory,
    effective_reward,
    rewards_by_trajectory,
    window_events,
    window_trajectories,
)

__all__ = ["canary_metrics", "shadow_metrics"]

_ERROR_STATUSES = {"error"}
# Stable's trajectories before the gate whose rewards give each tenant's success before it.
_PRE_PERIOD = 500


@dataclass(frozen=True)
class _Served:
    """What one version served in the window: its trajectories, oldest first, and their
    llm calls."""

    trajectories: list[WindowTrajectory]
    calls: dict[uuid.UUID, list[Event]]


def _served(session: Session, spec: WindowSpec, version_id: str, traffic: Traffic) -> _Served:
    update = {"version_ids": (version_id,), "traffic": traffic}
    window = trajectory_window(spec).model_copy(update=update)
    trajectories = window_trajectories(session, window)[::-1]
    return _Served(trajectories, window_events(session, window, EventKind.LLM_CALL))


def _rewards(
    session: Session,
    rows: list[WindowTrajectory],
    calls: dict[uuid.UUID, list[Event]] | None = None,
    settled_before: datetime | None = None,
) -> list[tuple[WindowTrajectory, float]]:
    """Each trajectory with its effective reward; one without any counts as accepted (1.0)
    when it was answered (`calls`) before `settled_before` and nobody complained since,
    else is left out."""
    rewards = rewards_by_trajectory(session, [row.id for row in rows])
    found = [(row, effective_reward(rewards.get(row.id, []))) for row in rows]
    settled = _settled(calls or {}, settled_before)
    return [
        (row, reward.value if reward is not None else 1.0)
        for row, reward in found
        if reward is not None or row.id in settled
    ]


def _settled(
    calls: dict[uuid.UUID, list[Event]], settled_before: datetime | None
) -> set[uuid.UUID]:
    """The trajectories whose last answer came before `settled_before` (none without it)."""
    if settled_before is None:
        return set()
    return {
        trajectory
        for trajectory, events in calls.items()
        if events and max(event.created_at for event in events) <= settled_before
    }


def _reward_samples(
    session: Session,
    served: _Served,
    before: dict[str, float] | None = None,
    settled_before: datetime | None = None,
) -> list[Sample]:
    """Effective rewards (silence as acceptance, see `_rewards`); with `before`, each
    tenant's success before the gate as covariate (the mean of all tenants for a tenant it
    did not see)."""
    before = before or {}
    overall = sum(before.values()) / len(before) if before else None
    return [
        Sample(
            tenant=row.tenant,
            value=value,
            key=str(row.id),
            covariate=before.get(row.tenant, overall),
        )
        for row, value in _rewards(session, served.trajectories, served.calls, settled_before)
    ]


def _success_before(session: Session, spec: WindowSpec, baseline: str) -> dict[str, float]:
    """Each tenant's mean reward on `baseline` over its last trajectories before `spec`."""
    if spec.since is None:
        return {}
    earlier = spec.model_copy(update={"since": None, "until": spec.since, "last": _PRE_PERIOD})
    update = {"version_ids": (baseline,), "traffic": Traffic.USER}
    window = trajectory_window(earlier).model_copy(update=update)
    by_tenant: dict[str, list[float]] = {}
    for row, value in _rewards(session, window_trajectories(session, window)):
        by_tenant.setdefault(row.tenant, []).append(value)
    return {tenant: sum(values) / len(values) for tenant, values in by_tenant.items()}


def _failed(event: Event) -> bool:
    outcome = event.outcome
    finish = getattr(event.action, "finish_reason", None)
    return bool(outcome and (outcome.error_class or outcome.success is False)) or finish == "error"


def _error_samples(served: _Served) -> list[Sample]:
    """1 for a trajectory with an upstream or tool error, else 0."""
    return [
        Sample(
            tenant=row.tenant,
            value=float(
                row.outcome_status in _ERROR_STATUSES
                or any(map(_failed, served.calls.get(row.id, [])))
            ),
            key=str(row.id),
        )
        for row in served.trajectories
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


def _validity_samples(served: _Served) -> list[Sample]:
    return [
        Sample(tenant=row.tenant, value=float(all(map(_tool_call_valid, served.calls[row.id]))))
        for row in served.trajectories
        if served.calls.get(row.id)
    ]


def canary_metrics(
    session: Session,
    window: WindowSpec,
    baseline: str,
    candidate: str,
    *,
    settled_before: datetime | None = None,
) -> list[MetricSamples]:
    """Effective reward (with each tenant's success before the window as its covariate) and
    error rate of user trajectories, baseline vs candidate; a trajectory answered before
    `settled_before` that no reward reached counts as accepted (None: none does)."""
    base = _served(session, window, baseline, Traffic.USER)
    cand = _served(session, window, candidate, Traffic.USER)
    before = _success_before(session, window, baseline)
    return [
        MetricSamples(
            name="reward",
            baseline=_reward_samples(session, base, before, settled_before),
            candidate=_reward_samples(session, cand, before, settled_before),
        ),
        _errors(base, cand),
    ]


def shadow_metrics(
    session: Session, window: WindowSpec, baseline: str, candidate: str
) -> list[MetricSamples]:
    """The candidate's shadow answers vs stable's live answers to the same period's traffic."""
    base = _served(session, window, baseline, Traffic.USER)
    cand = _served(session, window, candidate, Traffic.SHADOW)
    return [
        _errors(base, cand),
        MetricSamples(
            name="tool_call_valid",
            baseline=_validity_samples(base),
            candidate=_validity_samples(cand),
        ),
    ]


def _errors(base: _Served, cand: _Served) -> MetricSamples:
    return MetricSamples(
        name="error_rate",
        baseline=_error_samples(base),
        candidate=_error_samples(cand),
        higher_is_better=False,
    )
