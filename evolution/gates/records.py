"""What a gate reads and says: settings, samples, judgements, findings, the result."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "REPLAY_FAILURES",
    "REPLAY_SUCCESSES",
    "Finding",
    "Gate",
    "GateConfig",
    "GateResult",
    "Inconclusive",
    "MetricJudgement",
    "MetricSamples",
    "Question",
    "ReplayCase",
    "Sample",
    "Verdict",
]


Gate = Literal["replay", "shadow", "canary", "safety", "holdback"]


Inconclusive = Literal["ask", "extend", "roll_back"]


REPLAY_FAILURES = "replay:failures"


REPLAY_SUCCESSES = "replay:successes"


class Verdict(StrEnum):
    """What a gate says: go on, look longer (extend the step), or stop and roll back.

    `skipped` is no judgement at all: a person's option skipped the gate. The evolution goes
    on past it as past a pass, but no record may call it one.
    """

    PASS = "pass"
    MARGINAL = "marginal"
    FAIL = "fail"
    SKIPPED = "skipped"


class Question(StrEnum):
    """What a live gate must show before it passes, on the agent's primary metric.

    A fix should show a gain (superiority: the candidate is better, confidently); a change
    made to cut cost or size needs only to show it costs no more than `tolerance`
    (non-inferiority: confidently no worse than the tolerance). Other metrics are
    guardrails (no harm: they fail a candidate confidently worse than the tolerance).
    """

    SUPERIORITY = "superiority"
    NON_INFERIORITY = "non_inferiority"
    NO_HARM = "no_harm"


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class GateConfig(_Value):
    """Per-agent gate parameters; an evolution may override them (and the override is recorded).

    Args:
        confidence: how sure a gate must be before it calls a difference real (0.95: p < 0.05).
        tolerance: the largest mean drop of a metric, in the metric's units (reward units for
            rewards), that still passes.
        min_effect: the mean improvement the replay gate needs on past failures.
        min_samples: samples needed per side and metric; fewer make the gate marginal.
        min_tenant_samples: a tenant with fewer on either side is reported but not judged.
        tenant_tolerance: the largest drop on the primary metric one judged tenant may take.
            A live gate's pass waits until each judged tenant's interval (over every look,
            Bonferroni-corrected over tenants) is above -tenant_tolerance, so a change that
            helps most tenants cannot pass on one tenant's loss that its data has not yet
            ruled out; more sessions then answer it, or a person (`when_inconclusive`).
            None: a tenant stops a candidate only on confident harm, holding nothing (for
            traffic too thin to tell any tenant's drop: the demo's dozen sessions a tenant).
        replay_min_cases: replayed past failures, and known successes, each needed by the
            replay gate; fewer make it marginal. Replays are expensive, so this is lower
            than `min_samples`.
        replay_cases: recorded past failures, and known successes, the replay gate replays
            at most (newest first).
        replay_pass_score: the replay score at or above which a trajectory counts as a
            success; it only decides which trajectories are listed as fixed or broken.
        critical_metrics: metrics that fail the gate on their own, and are named first.
        step_weights: the canary's traffic share at each step, increasing. A step before the
            last advances at its first look that judged enough sessions (`min_samples` a
            side) and found no harm; only the last step must answer the question.
        step_seconds, shadow_seconds: how long between a canary's looks, and how long the
            shadow gate observes.
        canary_seconds: the canary's budget: the last step looks again, every `step_seconds`
            at most (sooner when its plan's sessions will be there sooner), until its
            question is answered, harm is evident, or this much time has passed since the
            canary began (at least one look a step). None: as long as a look at each step
            and `max_extensions` more take (the budget before there was one of its own).
        max_extensions: a marginal shadow gate may look this many more times, each sized
            from its plan, before it ends marginal (canaries recorded before the budget
            extended each step so).
        when_inconclusive: what a canary still unanswered at the end of its budget does:
            "ask" (the default) waits for a person (the `answer_canary` update: extend,
            promote or roll back) while it keeps serving, looking, and stopping on harm;
            "extend" keeps looking until `max_canary_seconds`; "roll_back" ends it. An
            unattended "ask" behaves as "extend": nobody's answer by `max_canary_seconds`
            rolls the canary back.
        max_canary_seconds: the longest a canary may run, extensions and the wait for a
            person included (a person may extend it further).
        holdback_weight: share of new sessions kept on the replaced version after a
            promotion (0: none). The holdback is an experiment of its own: it ends once
            stable is shown no worse than the held-back parent (non-inferiority at
            `tolerance`), or after `holdback_seconds`, or at the next promotion or
            rollback; a regression it shows starts a rollback evolution at once.
        holdback_seconds: the longest a holdback may run unanswered.
        silence_seconds: how long after its last answer a session that no reward reached
            counts as accepted. Many users never rate: they complain when an answer fails
            them (a next turn that denies or asks again is an implicit 0) and say nothing
            when it served them, so silence is their acceptance, once they have had the
            time to say something; a session answered more recently than this is left out
            of the look, as one still in flight.
        question: what the primary metric must show (None: follow the evolution's action;
            see `question_for`). A person's cost cut asks "non_inferiority".
        primary_metric: the metric the question is asked of; the others are guardrails.
        power: the chance the planned sessions give a live gate of telling a
            `tolerance`-sized difference (gain or drop) when it is there.
        method, bootstrap_resamples, seed: the significance test live gates used before
            they judged by confidence sequences; kept so recorded settings still load.
    """

    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    tolerance: float = Field(default=0.05, ge=0.0)
    min_effect: float = Field(default=0.0, ge=0.0)
    min_samples: int = Field(default=30, ge=1)
    min_tenant_samples: int = Field(default=10, ge=1)
    tenant_tolerance: float | None = Field(default=0.10, gt=0.0)
    replay_min_cases: int = Field(default=10, ge=1)
    replay_cases: int = Field(default=20, ge=1)  # recorded trajectories replayed per kind
    replay_pass_score: float = Field(default=0.5, gt=0.0, le=1.0)
    critical_metrics: list[str] = Field(default_factory=lambda: ["safety", "error_rate"])
    step_weights: list[float] = Field(default_factory=lambda: [0.05, 0.25, 0.5], min_length=1)
    step_seconds: float = Field(default=1800.0, gt=0.0)
    shadow_seconds: float = Field(default=1800.0, gt=0.0)
    canary_seconds: float | None = Field(default=12 * 3600.0, gt=0.0)
    max_extensions: int = Field(default=2, ge=0)
    when_inconclusive: Inconclusive = "ask"
    max_canary_seconds: float = Field(default=24 * 3600.0, gt=0.0)
    holdback_weight: float = Field(default=0.1, ge=0.0, le=0.5)
    holdback_seconds: float = Field(default=24 * 3600.0, gt=0.0)
    silence_seconds: float = Field(default=300.0, ge=0.0)
    question: Question | None = None
    primary_metric: str = "reward"
    power: float = Field(default=0.8, gt=0.5, lt=1.0)
    method: Literal["mann_whitney", "bootstrap"] = "mann_whitney"
    bootstrap_resamples: int = Field(default=2000, ge=100)
    seed: int = 0

    @field_validator("step_weights")
    @classmethod
    def _increasing_shares(cls, weights: list[float]) -> list[float]:
        if any(not 0.0 < weight <= 1.0 for weight in weights):
            raise ValueError(f"canary step weights must be in (0, 1], got {weights}")
        if any(later <= earlier for earlier, later in zip(weights, weights[1:], strict=False)):
            raise ValueError(f"canary step weights must increase step by step, got {weights}")
        return weights

    @model_validator(mode="after")
    def _a_difference_to_tell(self) -> GateConfig:
        if self.resolution <= 0:
            raise ValueError(
                "tolerance and min_effect are both 0: a live gate plans its sessions to tell "
                "a difference of that size; set tolerance (or min_effect) above 0"
            )
        return self

    @property
    def budget_seconds(self) -> float:
        """How long a canary may look before it is inconclusive: `canary_seconds`, and at
        least one look a step."""
        looks = len(self.step_weights)
        if self.canary_seconds is None:
            return self.step_seconds * (looks + self.max_extensions)
        return max(self.canary_seconds, self.step_seconds * looks)

    @property
    def limit_seconds(self) -> float:
        """How long an inconclusive canary may go on unless a person extends it."""
        return max(self.max_canary_seconds, self.budget_seconds)

    @property
    def resolution(self) -> float:
        """The smallest difference live gates plan to tell: the tolerance (else min_effect)."""
        return self.tolerance or self.min_effect


class Sample(_Value):
    """One observation of a metric: usually one session's effective reward or error flag.

    `covariate` is a value known before the gate began that predicts `value` (its tenant's
    success before the canary, say); when every sample has one, the judge subtracts what it
    explains (CUPED), which narrows the interval without moving what it estimates.
    """

    tenant: str
    value: float
    key: str | None = None  # the session or trajectory it came from, to trace a verdict back
    covariate: float | None = None


class MetricSamples(_Value):
    """A metric's samples on both sides of a comparison."""

    name: str
    baseline: list[Sample]
    candidate: list[Sample]
    higher_is_better: bool = True


class MetricJudgement(_Value):
    """The verdict on one metric, over all tenants (`tenant` None) or for one tenant.

    `delta` is candidate_mean - baseline_mean in the metric's units, whichever way is better;
    `delta_low`/`delta_high` bound it where the method gives an interval (bootstrap, replay).
    `effect` is the probability of superiority P(candidate > baseline) + 0.5 P(equal).
    A tenant with too few samples is reported with `judged` False; it never moves the gate.
    Live gates also say which `question` they asked, at what `confidence` the interval
    holds (every look at once; per tenant, Bonferroni-corrected), the `sessions_needed` on
    each side to answer it with the configured power, and by how much a covariate cut the
    variance (`variance_reduction`, 0.3: 30% less). A `held` tenant's `sessions_to_answer`
    are its own sessions a side that would show it within `tenant_tolerance`.
    """

    metric: str
    tenant: str | None = None
    verdict: Verdict
    n_baseline: int = Field(ge=0)
    n_candidate: int = Field(ge=0)
    baseline_mean: float | None = None
    candidate_mean: float | None = None
    delta: float | None = None
    delta_low: float | None = None
    delta_high: float | None = None
    p_value: float | None = Field(default=None, ge=0.0, le=1.0)
    effect: float | None = Field(default=None, ge=0.0, le=1.0)
    critical: bool = False
    judged: bool = True
    question: Question | None = None
    confidence: float | None = Field(default=None, gt=0.0, lt=1.0)
    sessions_needed: int | None = Field(default=None, ge=1)
    sessions_to_answer: int | None = Field(default=None, ge=1)
    held: bool = False  # a tenant not yet shown within `tenant_tolerance`: it held the pass
    variance_reduction: float | None = None
    reason: str


class Finding(_Value):
    """A failure the candidate shares with its parent: a fact about the agent, not the candidate.

    A gate reports it and does not block on it, since the candidate does not make it worse
    (unless the check is required, and then it is a failure, not a finding).

    Args:
        case: the safety case the agent fails.
        checks: the kinds of check the candidate's answer violated (the parent's did too).
        reason: what the candidate's answer did, in words.
        parent_reason: what the parent's answer did: the parent fails the case too.
    """

    case: str
    checks: list[str]
    reason: str
    parent_reason: str


class GateResult(_Value):
    """A gate's verdict with every judgement behind it, as stored with the evolution.

    Args:
        step, weight: the canary step's number and traffic share (None for other gates).
        metrics: the aggregate judgements (one per metric; per case for the safety gate).
        tenants: the per-tenant judgements.
        fixed, broken: replayed trajectories the candidate fixed (a past failure it now passes
            and stable does not) or broke (a known success stable passes and it does not).
        findings: failures the parent shares, reported as facts about the agent; they
            did not decide the verdict.
        skipped: the gate did not run because an option skipped it (its verdict is `skipped`).
        question: what a live gate asked of the primary metric.
        sessions_needed, sessions: the sessions a side a live gate planned for its question,
            and the fewer side's count it had.
        sessions_to_answer: the sessions a side that would answer the question if the
            change is what it looks like so far, a held tenant's included (None: more
            would not answer it).
    """

    gate: Gate
    step: int | None = Field(default=None, ge=0)
    weight: float | None = Field(default=None, gt=0.0, le=1.0)
    verdict: Verdict
    reason: str
    metrics: list[MetricJudgement] = Field(default_factory=list)
    tenants: list[MetricJudgement] = Field(default_factory=list)
    fixed: list[str] = Field(default_factory=list)
    broken: list[str] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    skipped: bool = False
    question: Question | None = None
    sessions_needed: int | None = Field(default=None, ge=1)
    sessions_to_answer: int | None = Field(default=None, ge=1)
    sessions: int | None = Field(default=None, ge=0)

    @model_validator(mode="before")
    @classmethod
    def _skipped_is_no_pass(cls, data: object) -> object:
        """Records stored before `skipped` was a verdict said `pass` with `skipped: true`."""
        if isinstance(data, dict) and data.get("skipped") and data.get("verdict") == "pass":
            return {**data, "verdict": Verdict.SKIPPED.value}
        return data

    @classmethod
    def skipped_gate(cls, gate: Gate, reason: str) -> GateResult:
        """A gate an option skipped: verdict `skipped`, so the record shows the gap."""
        return cls(gate=gate, verdict=Verdict.SKIPPED, reason=reason, skipped=True)

    @property
    def lets_through(self) -> bool:
        """The evolution may go on past this gate: it passed, or a person skipped it."""
        return self.verdict in (Verdict.PASS, Verdict.SKIPPED)


class ReplayCase(_Value):
    """One recorded trajectory replayed against stable and against the candidate.

    Scores are in [0, 1] and come from replaying the same recorded inputs on both versions,
    so the two scores of a case form a pair.
    """

    trajectory_id: str
    tenant: str
    recorded_success: bool
    baseline_score: float = Field(ge=0.0, le=1.0)
    candidate_score: float = Field(ge=0.0, le=1.0)
