"""What the control plane knows about a window of traffic: the input to every decision.

`WindowSpec` names the window (agent, tenants, time or count); `evolution.analysis`
computes a `WindowStats` from the registry; `evolution.decision` reads only `WindowStats`.
Everything here is a plain, serialisable value, so it can cross Temporal activity
boundaries and be stored with the decision that used it; `trajectory_window` turns a
`WindowSpec` into the registry's query.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from atdp import utcnow
from registry import TrajectoryWindow

__all__ = [
    "CanaryDelta",
    "Drift",
    "FailureCluster",
    "FailureKind",
    "FollowUpStats",
    "Mean",
    "ProcedureFailure",
    "Rate",
    "Regression",
    "RegressionDesign",
    "WindowSpec",
    "WindowStats",
    "trajectory_window",
]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WindowSpec(_Value):
    """Which traffic to look at.

    Args:
        tenants: None (or empty, as the CLI and the UI read it) for every tenant the
            agent serves.
        since, until: a time window; `until` defaults to now, read when the window is.
        last: a count window: the newest `last` trajectories before `until` (after `since`).
        version_id: only trajectories served by this agent version.
    """

    agent: str
    tenants: list[str] | None = None
    since: datetime | None = None
    until: datetime | None = None
    last: int | None = Field(default=None, ge=1)
    version_id: str | None = None

    @field_validator("tenants")
    @classmethod
    def _every_tenant(cls, tenants: list[str] | None) -> list[str] | None:
        return tenants or None

    @model_validator(mode="after")
    def _bounded(self) -> WindowSpec:
        if self.since is None and self.last is None:
            raise ValueError("a window needs `since` (a time window) or `last` (a count window)")
        if self.since and self.until and self.until <= self.since:
            raise ValueError("`until` must be after `since`")
        return self


class Rate(_Value):
    """A proportion with its 95% Wilson interval (rate None when total is 0)."""

    successes: int = Field(ge=0)
    total: int = Field(ge=0)
    rate: float | None
    low: float
    high: float


class Mean(_Value):
    """A mean with its 95% confidence interval (all None when n is 0)."""

    n: int = Field(ge=0)
    mean: float | None
    low: float | None
    high: float | None


class FailureKind(StrEnum):
    """Where a failure points, read off its evidence (not a decision yet)."""

    TOOL_ARGUMENT = "tool_argument"  # a tool refused its arguments: format, type, enum, missing
    TOOL_ROUTING = (
        "tool_routing"  # the wrong tool, an unknown or blocked tool, no tool when one was due
    )
    MISSING_FACT = "missing_fact"  # users had to supply or correct a fact the agent lacked
    INSTRUCTION = "instruction"  # the answer broke an instruction: format, policy, tone, steps
    TASK = "task"  # the task failed with no more specific evidence
    PROCEDURE = "procedure"  # a multi-step task goes wrong at one step until users guide it


class FailureCluster(_Value):
    """Failures that share a cause, with how widely they spread.

    `key` identifies the cluster within its kind: "tool.parameter:error_class" for tool
    failures, the normalised topic for missing facts, the category for instruction
    failures.
    """

    kind: FailureKind
    key: str
    tool: str | None = None
    parameter: str | None = None
    error_class: str | None = None
    step: int | None = Field(default=None, description="procedure clusters: the failing step")
    count: int = Field(ge=1)
    trajectories: int = Field(ge=1)
    share: float = Field(ge=0.0, le=1.0, description="trajectories / window trajectories")
    tenants: list[str]
    task_types: list[str]
    tool_setups: list[str] = Field(description="fingerprints of the tool sets offered")
    example_event_ids: list[uuid.UUID] = Field(max_length=5)
    examples: list[str] = Field(default_factory=list, max_length=5)


class ProcedureFailure(_Value):
    """One task type's multi-step trajectories going wrong at the same step, where users
    then walked the agent through it: read off structure alone (task type, the position of
    the answer users corrected, how consistent that position is, what followed).

    Args:
        step: the answer users corrected first, counted from 1 within each trajectory
            (the modal one of the task type); 2 or more, so earlier steps went right.
        trajectories: the task type's trajectories whose first guidance came at `step`.
        located: the task type's trajectories with any located guidance (the base of
            `consistency`).
        consistency: trajectories / located.
        fixed: of the guided trajectories at `step` with a known outcome, those that
            then succeeded: guidance fixes the task.
        task_trajectories: every trajectory of the task type in the window.
        successes: the task type's trajectories that succeeded without any guidance.
    """

    task_type: str
    step: int = Field(ge=2)
    trajectories: int = Field(ge=1)
    sessions: int = Field(ge=1)
    located: int = Field(ge=1)
    consistency: float = Field(ge=0.0, le=1.0)
    fixed: Rate
    task_trajectories: int = Field(ge=1)
    successes: int = Field(ge=0)
    share: float = Field(ge=0.0, le=1.0, description="trajectories / window trajectories")
    tenants: list[str]
    example_event_ids: list[uuid.UUID] = Field(default_factory=list, max_length=5)
    examples: list[str] = Field(default_factory=list, max_length=5)

    def cluster(self) -> FailureCluster:
        """The failure as the decision aims at it (a `procedure` cluster)."""
        return FailureCluster(
            kind=FailureKind.PROCEDURE,
            key=f"{self.task_type}@step {self.step}",
            step=self.step,
            count=self.trajectories,
            trajectories=self.trajectories,
            share=self.share,
            tenants=self.tenants,
            task_types=[self.task_type],
            tool_setups=[],
            example_event_ids=self.example_event_ids,
            examples=self.examples,
        )


class Drift(_Value):
    """How far the workload mix moved against the previous window of the same length."""

    divergence: float = Field(ge=0.0, le=1.0, description="Jensen-Shannon, base 2")
    previous_trajectories: int = Field(ge=0)
    grown: list[str] = Field(default_factory=list, description="task types whose share rose most")


class CanaryDelta(_Value):
    """Live effective reward of the canary against stable, over the same window."""

    stable_version: str
    canary_version: str
    weight: float
    stable: Mean
    canary: Mean
    delta: float | None


class RegressionDesign(StrEnum):
    HOLDBACK = "holdback"
    BEFORE_AFTER = "before_after"


class Regression(_Value):
    """The current stable against the version it replaced (set after a promotion).

    `design` says how they were compared: "holdback" on the same traffic since the
    promotion (the replaced version kept a share of new sessions), or "before_after": the
    stable since its promotion against the parent over as long a period just before it.
    """

    version_id: str
    parent_id: str
    promoted_at: datetime
    current: Mean
    parent: Mean
    delta: float | None
    design: RegressionDesign = RegressionDesign.BEFORE_AFTER


class FollowUpStats(_Value):
    """What users' follow-ups said, read without any score (`evolution.followups`).

    Args:
        read: follow-ups read (user messages after an answer).
        dissatisfied: trajectories with a follow-up read as dissatisfaction, of the
            window's trajectories: the failing share users told us about in words.
        satisfied: trajectories whose follow-ups thanked, and none was dissatisfied.
        signals: how often each signal was found among the dissatisfied follow-ups.
        judge: how a judge model's reading was used (None: the agent has none).
    """

    read: int = Field(ge=0)
    dissatisfied: Rate
    satisfied: int = Field(ge=0)
    signals: dict[str, int] = Field(default_factory=dict)
    judge: str | None = None
    judge_agreement: float | None = None


class WindowStats(_Value):
    """The window, measured. Rates count trajectories unless named otherwise; counts and
    sums are of the sample when the window was sampled (`sampled_from`)."""

    spec: WindowSpec
    since: datetime
    until: datetime
    stable_version: str | None
    trajectories: int = Field(ge=0)
    sampled_from: int | None = Field(
        default=None,
        description="the window's trajectories, when those measured are a uniform sample of them",
    )
    sessions: int = Field(ge=0)
    llm_calls: int = Field(ge=0)
    tool_calls: int = Field(ge=0)
    tenants: list[str]
    task_types: list[str]
    tool_setups: list[str]
    task_success: Rate
    reward: Mean
    correction_rate: Rate = Field(description="llm calls followed by a user correction or retry")
    tool_error_rate: Rate = Field(description="tool calls that failed")
    failures: list[FailureCluster] = Field(description="largest first")
    procedures: list[ProcedureFailure] = Field(
        default_factory=list, description="procedural failures, largest first"
    )
    cost_usd: float = Field(ge=0.0)
    cost_per_success: float | None
    drift: Drift | None
    canary: CanaryDelta | None
    regression: Regression | None
    follow_ups: FollowUpStats | None = None
    success_evidence: dict[str, int] = Field(
        default_factory=dict,
        description="trajectories whose success was judged by each kind of evidence: a "
        "reported outcome, a user's rating, or their follow-ups",
    )


def trajectory_window(spec: WindowSpec, *, until: datetime | None = None) -> TrajectoryWindow:
    """The registry's window for `spec`: the one conversion every reader of a window uses.

    `until` is the end when `spec` leaves it open (default: now).
    """
    return TrajectoryWindow(
        agent=spec.agent,
        tenants=tuple(spec.tenants) if spec.tenants is not None else None,
        version_ids=(spec.version_id,) if spec.version_id else None,
        since=spec.since,
        until=spec.until or until or utcnow(),
        last=spec.last,
    )
