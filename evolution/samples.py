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
from dataclasses import dataclass, field
from datetime import datetime

from atdp import Event, Reward, Traffic
from evolution.gates import MetricSamples, Sample
from evolution.window import WindowSpec, trajectory_window
from registry import TrajectoryWindow, WindowTrajectory, effective_reward

__all__ = [
    "GateTraffic",
    "Served",
    "canary_metrics",
    "gate_window",
    "pre_gate_window",
    "shadow_metrics",
]

_ERROR_STATUSES = {"error"}
# Stable's trajectories before the gate whose rewards give each tenant's success before it.
_PRE_PERIOD = 500


@dataclass(frozen=True)
class Served:
    """What one version served in a gate's window (`gate_window`): its trajectories as the
    window reads them (newest first), their llm calls, and their rewards (read for a
    canary, whose samples are rewards; a shadow's never are)."""

    trajectories: list[WindowTrajectory]
    calls: dict[uuid.UUID, list[Event]] = field(default_factory=dict)
    rewards: dict[uuid.UUID, list[Reward]] = field(default_factory=dict)


@dataclass(frozen=True)
class GateTraffic:
    """A gate's look: what the baseline and the candidate served, and for a canary what
    the baseline served before the gate (`pre_gate_window`: its trajectories and rewards),
    if the gate has a start."""

    baseline: Served
    candidate: Served
    before: Served | None = None


def gate_window(spec: WindowSpec, version_id: str, traffic: Traffic) -> TrajectoryWindow:
    """The trajectories of `traffic` that `version_id` served in the window `spec` names."""
    update = {"version_ids": (version_id,), "traffic": traffic}
    return trajectory_window(spec).model_copy(update=update)


def pre_gate_window(spec: WindowSpec, baseline: str) -> TrajectoryWindow | None:
    """The baseline's last user trajectories before `spec` (None for a window with no
    start): each tenant's success before the gate."""
    if spec.since is None:
        return None
    earlier = spec.model_copy(update={"since": None, "until": spec.since, "last": _PRE_PERIOD})
    return gate_window(earlier, baseline, Traffic.USER)


def _rewards(
    served: Served,
    rows: list[WindowTrajectory],
    settled_before: datetime | None = None,
) -> list[tuple[WindowTrajectory, float]]:
    """Each trajectory with its effective reward; one without any counts as accepted (1.0)
    when it was answered (`served.calls`) before `settled_before` and nobody complained
    since, else is left out."""
    found = [(row, effective_reward(served.rewards.get(row.id, []))) for row in rows]
    settled = _settled(served.calls, settled_before)
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
    served: Served,
    before: dict[str, float] | None = None,
    settled_before: datetime | None = None,
) -> list[Sample]:
    """Effective rewards, oldest first (silence as acceptance, see `_rewards`); with
    `before`, each tenant's success before the gate as covariate (the mean of all tenants
    for a tenant it did not see)."""
    before = before or {}
    overall = sum(before.values()) / len(before) if before else None
    return [
        Sample(
            tenant=row.tenant,
            value=value,
            key=str(row.id),
            covariate=before.get(row.tenant, overall),
        )
        for row, value in _rewards(served, served.trajectories[::-1], settled_before)
    ]


def _success_before(before: Served | None) -> dict[str, float]:
    """Each tenant's mean reward on the baseline over its last trajectories before the gate."""
    if before is None:
        return {}
    by_tenant: dict[str, list[float]] = {}
    for row, value in _rewards(before, before.trajectories):
        by_tenant.setdefault(row.tenant, []).append(value)
    return {tenant: sum(values) / len(values) for tenant, values in by_tenant.items()}


def _failed(event: Event) -> bool:
    outcome = event.outcome
    finish = getattr(event.action, "finish_reason", None)
    return bool(outcome and (outcome.error_class or outcome.success is False)) or finish == "error"


def _error_samples(served: Served) -> list[Sample]:
    """1 for a trajectory with an upstream or tool error, else 0; oldest first."""
    return [
        Sample(
            tenant=row.tenant,
            value=float(
                row.outcome_status in _ERROR_STATUSES
                or any(map(_failed, served.calls.get(row.id, [])))
            ),
            key=str(row.id),
        )
        for row in served.trajectories[::-1]
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


def _validity_samples(served: Served) -> list[Sample]:
    return [
        Sample(tenant=row.tenant, value=float(all(map(_tool_call_valid, served.calls[row.id]))))
        for row in served.trajectories[::-1]
        if served.calls.get(row.id)
    ]


def canary_metrics(
    traffic: GateTraffic, *, settled_before: datetime | None = None
) -> list[MetricSamples]:
    """Effective reward (with each tenant's success before the window as its covariate) and
    error rate of user trajectories, baseline vs candidate; a trajectory answered before
    `settled_before` that no reward reached counts as accepted (None: none does)."""
    base, cand = traffic.baseline, traffic.candidate
    before = _success_before(traffic.before)
    return [
        MetricSamples(
            name="reward",
            baseline=_reward_samples(base, before, settled_before),
            candidate=_reward_samples(cand, before, settled_before),
        ),
        _errors(base, cand),
    ]


def shadow_metrics(traffic: GateTraffic) -> list[MetricSamples]:
    """The candidate's shadow answers vs stable's live answers to the same period's traffic."""
    base, cand = traffic.baseline, traffic.candidate
    return [
        _errors(base, cand),
        MetricSamples(
            name="tool_call_valid",
            baseline=_validity_samples(base),
            candidate=_validity_samples(cand),
        ),
    ]


def _errors(base: Served, cand: Served) -> MetricSamples:
    return MetricSamples(
        name="error_rate",
        baseline=_error_samples(base),
        candidate=_error_samples(cand),
        higher_is_better=False,
    )
