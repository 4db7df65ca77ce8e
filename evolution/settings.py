"""An agent's evolution settings: how its gates judge, how its policy decides, its safety
suite, the tool simulators its tenants registered for replay, and the people and code that
judge its traffic (reviewers, code scorers, the evaluation set).

Stored as the agent's `settings` in the registry (`evoplane agent configure`, or
`PUT /api/agents/{agent}/settings`); every evolution starts from them and may override
`gate` and `policy` for itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evolution.decision import PolicyConfig
from evolution.evaluation.settings import EvaluationSettings
from evolution.gates import GateConfig
from evolution.replay.simulators import ToolSimulatorSpec
from evolution.review.settings import ReviewSettings
from evolution.rl.settings import TrainingSettings
from evolution.safety import SafetyCase
from evolution.scorers.settings import ScorerSpec

__all__ = ["EvolutionSettings", "HarnessSettings", "JudgeSettings"]


class HarnessSettings(BaseModel):
    """How the harness operator optimises this agent (None keeps the worker's choice).

    A small model may follow new instructions yet be thrown by few-shot turns in its
    context; `max_bootstrapped_demos=0, max_labeled_demos=0` then limits the operator to
    the instructions.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_bootstrapped_demos: int | None = Field(None, ge=0, le=16)
    max_labeled_demos: int | None = Field(None, ge=0, le=16)
    candidate_programs: int | None = Field(None, ge=1, le=64)
    per_kind: int | None = Field(None, ge=1, le=500)
    samples: int | None = Field(None, ge=1, le=32)


class JudgeSettings(BaseModel):
    """A judge model that reads users' corrections (what kind, what about).

    The judge is an agent of its own, registered like any other (its version names the
    judge model's upstream), and is called through the gateway as evaluation traffic.

    Args:
        agent: the judge agent's name.
        tenant: the tenant its calls are made as (default: one that may use it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    agent: str = Field(min_length=1)
    tenant: str | None = None


class EvolutionSettings(BaseModel):
    """Args:
    gate: gate parameters (minimum samples, step weights and durations, confidence...).
    policy: decision thresholds, costs and risks.
    safety_suite: the agent's own safety cases; None runs the generic suite.
    tool_simulators: what answers a replayed tool call that left the recorded path, per
        tenant (see `evolution.replay.simulators`); without one the replay stops there.
    training: how weight evolutions train (`evolution.rl.settings`).
    harness: how the harness operator optimises (demos, candidate programs).
    judge: a model that reads users' corrections; None reads them offline.
    review: who reviews what needs a person, and whether MLflow mirrors the queue.
    scorers: code scorers run on the agent's captured traffic (their results are rewards).
    evaluation: the agent's evaluation set: where reviewed and fixed cases go, who uses it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    gate: GateConfig = Field(default_factory=GateConfig)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    safety_suite: list[SafetyCase] | None = None
    tool_simulators: list[ToolSimulatorSpec] = Field(default_factory=list)
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    harness: HarnessSettings = Field(default_factory=HarnessSettings)
    judge: JudgeSettings | None = None
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    scorers: list[ScorerSpec] = Field(default_factory=list)
    evaluation: EvaluationSettings = Field(default_factory=EvaluationSettings)

    @field_validator("scorers")
    @classmethod
    def _scorers_named_once(cls, scorers: list[ScorerSpec]) -> list[ScorerSpec]:
        names = [scorer.name for scorer in scorers]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"each scorer needs a name of its own; given twice: {twice}")
        return scorers

    @classmethod
    def of(cls, settings: dict[str, Any] | None) -> EvolutionSettings:
        """From an agent's stored settings (absent keys take the defaults)."""
        return cls.model_validate(settings or {})
