"""What a decision is made of: the actions, the policy's settings, the scores, the record."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from evolution.gates.plan import CanaryPlan
from evolution.window import (
    FailureCluster,
    WindowSpec,
)

__all__ = ["Action", "ActionScore", "DecisionRecord", "PolicyConfig", "Signal"]


class Action(StrEnum):
    """Where the control plane may change an agent (or decide not to)."""

    MEMORY = "memory"
    SKILL = "skill"
    HARNESS = "harness"
    TOOL_SCHEMA = "tool_schema"
    WEIGHTS = "weights"
    ROLLBACK = "rollback"
    NOOP = "noop"


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PolicyConfig(_Value):
    """One agent's decision settings; costs and risks are in shares of trajectories."""

    min_trajectories: int = Field(30, ge=1, description="below it: noop, too little evidence")
    min_cluster_trajectories: int = Field(5, ge=1, description="smallest cluster worth a fix")
    min_gain: float = Field(0.02, ge=0.0, description="smallest expected gain worth a change")
    memory_cost: float = Field(0.005, ge=0.0, description="writing memory items: cheap")
    skill_cost: float = Field(0.005, ge=0.0, description="a skill in the version: cheap")
    tool_schema_cost: float = Field(0.005, ge=0.0, description="a schema overlay: cheap")
    harness_cost: float = Field(0.01, ge=0.0, description="prompt optimisation: moderate")
    weights_cost: float = Field(0.04, ge=0.0, description="an RL or SFT run on GPUs: expensive")
    rollback_cost: float = Field(0.002, ge=0.0, description="moving an alias back: nearly free")
    memory_risk: float = Field(0.005, ge=0.0, description="a wrong fact hurts few requests")
    skill_risk: float = Field(0.01, ge=0.0, description="touches the requests it matches")
    tool_schema_risk: float = Field(0.01, ge=0.0, description="touches every call of one tool")
    harness_risk: float = Field(0.015, ge=0.0, description="touches every request")
    weights_risk: float = Field(0.04, ge=0.0, description="may forget what already works")
    rollback_risk: float = Field(0.005, ge=0.0, description="the parent was proven on traffic")
    weights_min_tenants: int = Field(3, ge=1, description="tenants a failure must span for weights")
    weights_min_task_types: int = Field(3, ge=1, description="task types it must span for weights")
    weights_min_tool_setups: int = Field(
        2, ge=1, description="tool setups it must span for weights"
    )
    skill_min_sessions: int = Field(
        3, ge=1, description="sessions a procedural failure must recur in for a skill"
    )
    skill_min_consistency: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="share of a task type's guided trajectories first guided at the same step",
    )
    skill_min_fixed: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="share of guided trajectories that then succeeded: guidance fixes the task",
    )
    spread_loss: float = Field(
        0.75, ge=0.0, le=1.0, description="effect a context fix loses on a weights-wide failure"
    )
    drift_sensitivity: float = Field(
        1.0, ge=0.0, description="gain discount per unit of workload drift (JS divergence)"
    )
    drift_min_trajectories: int = Field(
        30,
        ge=1,
        description="trajectories the period before the window needs for a drift to count "
        "(the mix of a few is noise: three sessions of one task type read as a drift of 0.7)",
    )
    regression_tolerance: float = Field(
        0.05, ge=0.0, description="reward drop vs the parent that warrants a rollback"
    )
    regression_min_samples: int = Field(
        30, ge=1, description="rewards needed on each side before a regression counts"
    )
    canary_tolerance: float = Field(
        0.05, ge=0.0, description="reward drop of the canary vs stable that clears it"
    )
    canary_min_samples: int = Field(
        30, ge=1, description="rewards needed on each side before a canary delta counts"
    )
    unanswered_cost: float = Field(
        0.01,
        ge=0.0,
        description="cost of a change whose canary cannot answer within its budget at "
        "today's traffic (times the share of its plan the budget cannot cover)",
    )
    unanswered_risk: float = Field(
        0.01,
        ge=0.0,
        description="risk of serving users a change whose effect its canary cannot tell "
        "within its budget (times the same share)",
    )
    rollback_priority: float = Field(
        1.0, ge=0.0, description="gain added to a confirmed rollback so it outranks fixes"
    )
    sft_below: float = Field(
        0.1, ge=0.0, le=1.0, description="success below which weights train SFT first, not GRPO"
    )
    dpo_min_corrections: int = Field(
        20, ge=1, description="corrected or retried answers that make weights train DPO"
    )

    def cost(self, action: Action) -> float:
        """What `action` costs to build and gate (noop costs nothing)."""
        return 0.0 if action is Action.NOOP else getattr(self, f"{action.value}_cost")

    def risk(self, action: Action) -> float:
        """How much `action` may break before evidence is counted (noop risks nothing)."""
        return 0.0 if action is Action.NOOP else getattr(self, f"{action.value}_risk")


class ActionScore(_Value):
    """One action's case: score = expected_gain - cost - risk, aimed at `target`."""

    action: Action
    expected_gain: float
    cost: float
    risk: float
    score: float
    evidence: str
    # The failure cluster the action was scored against, so a fallback to it knows what
    # to address (None: rollback, noop, or a change with nothing to aim at).
    target: FailureCluster | None = None
    # The change's canary at today's traffic (None: rollback, noop, or a decision made
    # without the agent's gate settings or without two rewards in the window).
    plan: CanaryPlan | None = None


Signal = float | int | str | None


class DecisionRecord(_Value):
    """What was decided, why, and every number the policy read: the audit trail."""

    action: Action
    reason: str
    target: FailureCluster | None
    scores: list[ActionScore]
    signals: dict[str, Signal]
    window: WindowSpec
    stable_version: str | None
    forced: bool = False
    # The actions the agent was allowed (noop among them); None for all.
    allowed: list[Action] | None = None
    # The held-back parent has answered: stable is no worse than it (within the regression
    # tolerance) on enough rewards each side, so the holdback may end.
    holdback_answered: bool = False
    # How a weights change trains on this window (sft, dpo, grpo) and why; set when the
    # action is weights (`evolution.decision.algorithm`).
    algorithm: str | None = None
    algorithm_reason: str | None = None
