"""The values workflows and activities exchange (through Temporal's pydantic converter).

Workflows import these to describe what they ask for; activities import them to answer.
Nothing here does I/O.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from atdp import VersionSpec
from evolution.decision import Action, DecisionRecord, PolicyConfig
from evolution.gates import GateConfig, GateResult, Question
from evolution.gates.plan import CanaryPlan
from evolution.operators import Candidate
from evolution.window import WindowSpec

__all__ = [
    "AliasChange",
    "Approval",
    "ApprovalPoint",
    "BeginResult",
    "CanaryAnswer",
    "CandidateRequest",
    "DecideRequest",
    "EvolutionOptions",
    "EvolutionRequest",
    "EvolutionStatus",
    "FinishRequest",
    "GateName",
    "HoldbackEnd",
    "HoldbackLook",
    "HoldbackWatch",
    "LiveGateRequest",
    "OpenQuestion",
    "Outcome",
    "RegisterRequest",
    "ReplayGateRequest",
    "ReviewReport",
    "ReviewRequest",
    "RollbackRequest",
    "RollbackResult",
    "ScoreReport",
    "ScoreRequest",
    "ScorerRun",
    "Stage",
    "StageRecord",
    "TriedAction",
]


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Stage(StrEnum):
    """Where an evolution is; also the `Stage` search attribute."""

    STARTED = "started"
    ANALYSING = "analysing"
    DECIDING = "deciding"
    BUILDING = "building"
    REPLAY = "replay"
    AWAITING_APPROVAL = "awaiting_approval"
    SHADOW = "shadow"
    CANARY = "canary"
    PROMOTING = "promoting"
    HOLDBACK = "holdback"
    ROLLING_BACK = "rolling_back"
    DONE = "done"


class Outcome(StrEnum):
    """How an evolution ended; also the `Outcome` search attribute."""

    PROMOTED = "promoted"
    ROLLED_BACK = "rolled_back"
    ABORTED = "aborted"
    REJECTED = "rejected"
    NOOP = "noop"
    FAILED = "failed"


GateName = Literal["replay", "shadow", "canary"]
ApprovalPoint = Literal["canary", "promotion"]


class EvolutionOptions(_Message):
    """How one evolution may deviate from the agent's defaults (every deviation is recorded).

    Args:
        force: take this action whatever the policy prefers (the scores are still kept).
        candidate: evaluate this version spec instead of running the action's operator
            (a person's own proposal goes through the same gates).
        skip_gates: gates to skip; each is recorded as skipped in the evolution.
        approve_before: points where a person must approve (a Temporal Update).
        window_minutes / window_since / window_last: the traffic window: the last minutes,
            everything since a moment (a drift's start, say), or the newest N trajectories.
    """

    force: Action | None = None
    candidate: VersionSpec | None = None
    skip_gates: list[GateName] = Field(default_factory=list)
    approve_before: list[ApprovalPoint] = Field(default_factory=list)
    gate: GateConfig | None = None
    policy: PolicyConfig | None = None
    window_minutes: float = Field(default=24 * 60, gt=0)
    window_since: AwareDatetime | None = None
    window_last: int | None = Field(default=None, ge=1)
    actor: str = "evoplane"
    reason: str = ""

    @model_validator(mode="after")
    def _one_window(self) -> EvolutionOptions:
        if self.window_since is not None and self.window_last is not None:
            raise ValueError("give window_since or window_last, not both")
        return self


class EvolutionRequest(_Message):
    """What starts an `EvolutionWorkflow`."""

    agent: str
    tenants: list[str] | None = None
    options: EvolutionOptions = Field(default_factory=EvolutionOptions)


class BeginResult(_Message):
    parent_version: str
    mlflow_run_id: str | None
    gate: GateConfig
    policy: PolicyConfig
    window: WindowSpec
    # The tenants in scope: the request's, else every tenant granted the agent.
    tenants: list[str] = Field(default_factory=list)


class DecideRequest(_Message):
    evolution_id: str
    mlflow_run_id: str | None
    window: WindowSpec
    policy: PolicyConfig
    force: Action | None = None
    gate: GateConfig | None = None  # each change's canary is planned with it


class CandidateRequest(_Message):
    evolution_id: str
    mlflow_run_id: str | None = None
    agent: str
    parent_version: str
    decision: DecisionRecord
    window: WindowSpec
    candidate: VersionSpec | None = None


class RegisterRequest(_Message):
    evolution_id: str
    mlflow_run_id: str | None
    agent: str
    parent_version: str
    candidate: Candidate
    reason: str


class ReplayGateRequest(_Message):
    evolution_id: str
    agent: str
    baseline_version: str
    candidate_version: str
    action: Action
    gate: GateConfig
    window: WindowSpec


class LiveGateRequest(_Message):
    """Judge live traffic of candidate vs baseline since `since` (shadow or canary).

    `since` is when the gate's first step began: every step and extension looks again at
    all of the gate's traffic, which its confidence sequences allow. `action` decides the
    question the primary metric must answer (`evolution.gates.question_for`).
    """

    agent: str
    gate: Literal["shadow", "canary"]
    baseline_version: str
    candidate_version: str
    since: datetime
    tenants: list[str] | None = None
    step: int | None = None
    weight: float | None = None
    config: GateConfig
    action: Action | None = None


class AliasChange(_Message):
    agent: str
    alias: Literal["stable", "canary", "shadow", "holdback"]
    version_id: str | None
    weight: float | None = None
    actor: str
    reason: str
    evolution_id: str | None = None


class TriedAction(_Message):
    """An action whose operator could not build a candidate here, and why: the evolution
    then tries the decision's next-best action, or ends noop when none is left."""

    action: Action
    outcome: Literal["nothing_to_propose", "operator_not_available"]
    reason: str


class StageRecord(_Message):
    evolution_id: str
    mlflow_run_id: str | None
    stage: Stage
    result: GateResult | None = None
    step: int = 0
    tried: TriedAction | None = None  # kept among the stages as a build that could not help
    next_action: Action | None = None  # the action the evolution goes on with instead


class FinishRequest(_Message):
    evolution_id: str
    mlflow_run_id: str | None
    outcome: Outcome
    reason: str


class Approval(_Message):
    """A person's answer at an approval point."""

    actor: str = Field(min_length=1)
    reason: str = ""


class CanaryAnswer(_Message):
    """A person's answer to a canary inconclusive at the end of its budget.

    Args:
        choice: "extend" it (for `hours`, default the time its open question still needs at
            the pace so far), "promote" it although its question is open (recorded as the
            person's call, never as a pass), or "roll_back".
    """

    actor: str = Field(min_length=1)
    choice: Literal["extend", "promote", "roll_back"]
    hours: float | None = Field(default=None, gt=0.0)
    reason: str = ""


class OpenQuestion(_Message):
    """What an inconclusive canary shows the person it asks.

    Args:
        sessions: the sessions a side it has.
        sessions_more: the sessions a side more that would answer its question if the
            change is what it looks like so far (None: more would not answer it).
        hours_more: how long those take at the pace of its last share.
        words: all of it in a sentence, as the Temporal details show it.
    """

    question: Question | None
    sessions: int = Field(ge=0)
    sessions_more: int | None = Field(default=None, ge=0)
    hours_more: float | None = Field(default=None, ge=0.0)
    words: str


class HoldbackWatch(_Message):
    """A holdback to watch: the replaced version `parent` held back since `since` after the
    evolution `evolution_id` promoted `stable`."""

    agent: str
    stable: str
    parent: str
    since: datetime
    evolution_id: str
    gate: GateConfig
    tenants: list[str] | None = None


class HoldbackLook(_Message):
    """One look at a holdback: whether it still runs as watched (stable and the held-back
    parent unchanged), the evolution running for the agent, if any, and the judgement of
    stable against the parent (non-inferiority) while it runs."""

    watching: bool
    evolution: str | None = None
    result: GateResult | None = None


class HoldbackEnd(_Message):
    """End a watched holdback (if it still runs as watched) and record why with the
    evolution that began it."""

    watch: HoldbackWatch
    reason: str
    result: GateResult | None = None
    clear: bool = True  # False: record only (a regression: the rollback clears it)


class RollbackRequest(_Message):
    agent: str
    to_version: str | None = None  # None: the stable before the current one
    actor: str = "evoplane"
    reason: str = ""
    evolution_id: str | None = None


class RollbackResult(_Message):
    agent: str
    from_version: str | None
    to_version: str


class EvolutionStatus(_Message):
    """The `status` query: enough to follow an evolution without opening its history."""

    evolution_id: str
    agent: str
    stage: Stage
    action: Action | None = None
    reason: str | None = None
    decision: DecisionRecord | None = None
    parent_version: str | None = None
    candidate_version: str | None = None
    gates: list[GateResult] = Field(default_factory=list)
    tried: list[TriedAction] = Field(default_factory=list)  # actions whose operator could not help
    awaiting_approval: ApprovalPoint | None = None
    plan: CanaryPlan | None = None  # the canary's plan at today's traffic, before it began
    inconclusive: OpenQuestion | None = None  # the canary waits for a person's answer
    outcome: Outcome | None = None
    mlflow_run_id: str | None = None


class ScoreRequest(_Message):
    """Run the agent's code scorers (or those named) on the window's unscored traffic."""

    window: WindowSpec
    scorers: list[str] | None = None


class ScorerRun(_Message):
    """What one run of one scorer did: trajectories scored, abstained on, failed (tried
    again on a later run), left for a later run by the budget; and the error that stopped
    it, if one did (a scorer that cannot be loaded, say)."""

    scored: int = 0
    abstained: int = 0
    failed: int = 0
    left: int = 0
    error: str | None = None
    errors: list[str] = Field(default_factory=list)  # a few of the failures, in words


class ScoreReport(_Message):
    agent: str
    scorers: dict[str, ScorerRun] = Field(default_factory=dict)

    def words(self) -> str:
        """'booking: 12 scored, 1 failed; json-valid: cannot load ...'"""
        return (
            "; ".join(
                f"{name}: {run.error}"
                if run.error
                else (
                    f"{name}: {run.scored} scored, {run.abstained} abstained, {run.failed} failed"
                    + (f", {run.left} left for later" if run.left else "")
                )
                for name, run in self.scorers.items()
            )
            or "no scorers"
        )


class ReviewRequest(_Message):
    """Queue what in this window and the agent's evolutions needs a person."""

    window: WindowSpec
    evolution_id: str | None = None


class ReviewReport(_Message):
    agent: str
    queued: int = 0  # drafts merged into the queue
    new: int = 0  # of them, items the queue did not hold
    mirror_error: str | None = None
