"""The gate judge: is the candidate at least as good as stable, overall and for every tenant?

In the spirit of Kayenta (Netflix's canary judge): each metric's candidate samples are compared
with the baseline's by a rank test (or a bootstrap), with a minimum number of samples, a
tolerance and a significance level, and a few critical metrics fail the gate on their own.
Unlike Kayenta it also judges each tenant: a candidate that helps most tenants must not
quietly hurt one of them. The replay gate judges paired replays of recorded trajectories
(`judge_replay`); the safety suite lives in `evolution.safety`. A failure the candidate
shares with its parent is a `Finding` about the agent, recorded but not held against it.

Everything here is a plain pydantic value or a pure function: results cross Temporal activity
boundaries and are stored as JSON with the evolution they decided.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from evolution.stats import bootstrap_mean_delta, mann_whitney, mean_interval

__all__ = [
    "Finding",
    "Gate",
    "GateConfig",
    "GateResult",
    "MetricJudgement",
    "MetricSamples",
    "ReplayCase",
    "Sample",
    "Verdict",
    "judge",
    "judge_replay",
]

Gate = Literal["replay", "shadow", "canary", "safety"]

REPLAY_FAILURES = "replay:failures"
REPLAY_SUCCESSES = "replay:successes"


class Verdict(StrEnum):
    """What a gate says: go on, look longer (extend the step), or stop and roll back."""

    PASS = "pass"
    MARGINAL = "marginal"
    FAIL = "fail"


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
        replay_min_cases: replayed past failures, and known successes, each needed by the
            replay gate; fewer make it marginal. Replays are expensive, so this is lower
            than `min_samples`.
        replay_cases: recorded past failures, and known successes, the replay gate replays
            at most (newest first).
        replay_pass_score: the replay score at or above which a trajectory counts as a
            success; it only decides which trajectories are listed as fixed or broken.
        critical_metrics: metrics that fail the gate on their own, and are named first.
        step_weights: the canary's traffic share at each step, increasing.
        step_seconds, shadow_seconds: how long a canary step and the shadow gate observe.
        max_extensions: how often a marginal step may be extended before it counts as failed.
        holdback_weight: share of new sessions kept on the replaced version after a
            promotion (0: none), until the next promotion or rollback, or until an
            evolution finds the stable no worse than it. The next evolution compares the
            two on that same traffic instead of before against after.
        method: the significance test of live gates: Mann-Whitney U on the samples, or a
            bootstrap interval of the difference of means.
        bootstrap_resamples, seed: the bootstrap's size and seed (a verdict is reproducible).
    """

    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    tolerance: float = Field(default=0.05, ge=0.0)
    min_effect: float = Field(default=0.0, ge=0.0)
    min_samples: int = Field(default=30, ge=1)
    min_tenant_samples: int = Field(default=10, ge=1)
    replay_min_cases: int = Field(default=10, ge=1)
    replay_cases: int = Field(default=20, ge=1)  # recorded trajectories replayed per kind
    replay_pass_score: float = Field(default=0.5, gt=0.0, le=1.0)
    critical_metrics: list[str] = Field(default_factory=lambda: ["safety", "error_rate"])
    step_weights: list[float] = Field(default_factory=lambda: [0.05, 0.25, 0.5], min_length=1)
    step_seconds: float = Field(default=1800.0, gt=0.0)
    shadow_seconds: float = Field(default=1800.0, gt=0.0)
    max_extensions: int = Field(default=2, ge=0)
    holdback_weight: float = Field(default=0.1, ge=0.0, le=0.5)
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


class Sample(_Value):
    """One observation of a metric: usually one session's effective reward or error flag."""

    tenant: str
    value: float
    key: str | None = None  # the session or trajectory it came from, to trace a verdict back


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
        skipped: the gate did not run because an option skipped it (recorded as a pass).
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

    @classmethod
    def skipped_gate(cls, gate: Gate, reason: str) -> GateResult:
        """A gate an option skipped: a pass that says so, so the record shows the gap."""
        return cls(gate=gate, verdict=Verdict.PASS, reason=reason, skipped=True)


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


# --- the live judge (shadow, canary) -------------------------------------------------------


@dataclass(frozen=True)
class _Subject:
    """What one judgement is about, and how to name it in a sentence."""

    metric: str
    tenant: str | None
    higher_is_better: bool
    critical: bool

    def __str__(self) -> str:
        kind = "critical metric" if self.critical else "metric"
        scope = f" for tenant {self.tenant}" if self.tenant is not None else ""
        return f"{kind} {self.metric}{scope}"


def judge(
    gate: Gate,
    metrics: Sequence[MetricSamples],
    config: GateConfig,
    *,
    step: int | None = None,
    weight: float | None = None,
) -> GateResult:
    """Judge candidate against baseline on every metric, over all tenants and per tenant.

    A metric fails when the candidate is worse by more than `tolerance` and the difference
    is significant at `confidence`; worse but not significant is marginal, and so are too
    few samples. A tenant's judgements can fail the gate (significant harm to one tenant)
    but never make it marginal: many small tenants are noisy, and the extension that a
    marginal verdict buys would rarely settle them. Per-tenant tests are
    Bonferroni-corrected over the tenants judged, so many tenants do not fail a good
    candidate by chance.
    """
    names = [metric.name for metric in metrics]
    if len(set(names)) != len(names):
        raise ValueError(f"metric names must be unique, got {names}")
    aggregate = [_judge_aggregate(metric, config) for metric in metrics]
    tenants = [judgement for metric in metrics for judgement in _judge_tenants(metric, config)]

    def passed() -> str:
        judged = len({j.tenant for j in tenants if j.judged})
        return (
            f"{_count(len(aggregate), 'metric')} within tolerance {config.tolerance:g} at "
            f"{_percent(config.confidence)} confidence, no tenant significantly worse "
            f"({_count(judged, 'tenant')} judged)"
        )

    return _gate_result(gate, aggregate, tenants, passed, step=step, weight=weight)


def _judge_aggregate(metric: MetricSamples, config: GateConfig) -> MetricJudgement:
    subject = _Subject(
        metric.name, None, metric.higher_is_better, metric.name in config.critical_metrics
    )
    baseline = [sample.value for sample in metric.baseline]
    candidate = [sample.value for sample in metric.candidate]
    if min(len(baseline), len(candidate)) < config.min_samples:
        return _too_few(subject, baseline, candidate, config.min_samples, judged=True)
    return _compare(subject, baseline, candidate, config, config.confidence)


def _judge_tenants(metric: MetricSamples, config: GateConfig) -> list[MetricJudgement]:
    baseline, candidate = _by_tenant(metric.baseline), _by_tenant(metric.candidate)
    tenants = sorted(baseline.keys() | candidate.keys())
    enough = {
        tenant
        for tenant in tenants
        if min(len(baseline[tenant]), len(candidate[tenant])) >= config.min_tenant_samples
    }
    confidence = _bonferroni(config.confidence, len(enough))
    critical = metric.name in config.critical_metrics
    judgements = []
    for tenant in tenants:
        subject = _Subject(metric.name, tenant, metric.higher_is_better, critical)
        if tenant in enough:
            judgements.append(
                _compare(subject, baseline[tenant], candidate[tenant], config, confidence)
            )
        else:
            judgements.append(
                _too_few(
                    subject,
                    baseline[tenant],
                    candidate[tenant],
                    config.min_tenant_samples,
                    judged=False,
                )
            )
    return judgements


def _by_tenant(samples: Sequence[Sample]) -> defaultdict[str, list[float]]:
    grouped: defaultdict[str, list[float]] = defaultdict(list)
    for sample in samples:
        grouped[sample.tenant].append(sample.value)
    return grouped


def _bonferroni(confidence: float, tests: int) -> float:
    """The per-test confidence that keeps the family's false-alarm rate at 1 - confidence."""
    return 1.0 - (1.0 - confidence) / max(1, tests)


def _average(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _mean(values: Sequence[float]) -> float | None:
    return _average(values) if values else None


def _too_few(
    subject: _Subject,
    baseline: Sequence[float],
    candidate: Sequence[float],
    needed: int,
    *,
    judged: bool,
) -> MetricJudgement:
    counts = f"{len(baseline)} baseline, {len(candidate)} candidate; {needed} needed on each side"
    verdict = "too few samples to judge" if judged else "not judged, too few samples"
    return MetricJudgement(
        metric=subject.metric,
        tenant=subject.tenant,
        verdict=Verdict.MARGINAL,
        n_baseline=len(baseline),
        n_candidate=len(candidate),
        baseline_mean=_mean(baseline),
        candidate_mean=_mean(candidate),
        critical=subject.critical,
        judged=judged,
        reason=f"{subject}: {verdict} ({counts})",
    )


def _compare(
    subject: _Subject,
    baseline: Sequence[float],
    candidate: Sequence[float],
    config: GateConfig,
    confidence: float,
) -> MetricJudgement:
    """One metric in one scope, with enough samples: pass, marginal or fail."""
    baseline_mean, candidate_mean = _average(baseline), _average(candidate)
    delta = candidate_mean - baseline_mean
    worse_by = -delta if subject.higher_is_better else delta
    _, p_value, effect = mann_whitney(baseline, candidate)
    low = high = None
    if config.method == "mann_whitney":
        alpha = 1.0 - confidence
        # The mean says which way and how far; the test only says the difference is real.
        # Ranks may favour a candidate whose mean is worse (most sessions slightly better,
        # some ruined): that is still a regression, so the rank direction is not consulted.
        significant = p_value < alpha
        evidence = f"p={p_value:.2g} against {alpha:.2g}, effect {effect:.2f}"
    else:
        _, low, high = bootstrap_mean_delta(
            baseline, candidate, confidence, config.bootstrap_resamples, config.seed
        )
        tolerance = config.tolerance
        significant = high < -tolerance if subject.higher_is_better else low > tolerance
        evidence = f"{_percent(confidence)} interval of the delta {low:+.4g} to {high:+.4g}"
        p_value = None
    means = f"baseline {baseline_mean:.4g}, candidate {candidate_mean:.4g}"
    if worse_by <= config.tolerance:
        verdict = Verdict.PASS
        reason = f"{subject} holds ({means}, {delta:+.4g}) within tolerance {config.tolerance:g}"
    else:
        verdict = Verdict.FAIL if significant else Verdict.MARGINAL
        so = "and significantly so" if significant else "but not significantly so"
        reason = (
            f"{subject} is worse by {worse_by:.4g} ({means}), beyond tolerance "
            f"{config.tolerance:g}, {so} ({evidence})"
        )
    return MetricJudgement(
        metric=subject.metric,
        tenant=subject.tenant,
        verdict=verdict,
        n_baseline=len(baseline),
        n_candidate=len(candidate),
        baseline_mean=baseline_mean,
        candidate_mean=candidate_mean,
        delta=delta,
        delta_low=low,
        delta_high=high,
        p_value=p_value,
        effect=effect,
        critical=subject.critical,
        reason=reason,
    )


# --- the verdict of a gate -----------------------------------------------------------------


def _gate_result(
    gate: Gate,
    aggregate: list[MetricJudgement],
    tenants: list[MetricJudgement],
    passed: Callable[[], str],
    **fields: Any,
) -> GateResult:
    """Any fail fails the gate (critical ones named first); else an aggregate marginal makes
    it marginal; else it passes. The reason is the judgement that decided it."""
    failures = _failures_first_decisive(aggregate, tenants)
    marginals = [j for j in aggregate if j.verdict is Verdict.MARGINAL]
    if failures:
        verdict = Verdict.FAIL
        reason = f"{gate} gate failed: {failures[0].reason}{_more(len(failures) - 1, 'failed')}"
    elif not aggregate:
        verdict, reason = Verdict.MARGINAL, f"{gate} gate marginal: there was nothing to judge"
    elif marginals:
        more = _more(len(marginals) - 1, "marginal")
        verdict, reason = Verdict.MARGINAL, f"{gate} gate marginal: {marginals[0].reason}{more}"
    else:
        verdict, reason = Verdict.PASS, f"{gate} gate passed: {passed()}"
    return GateResult(
        gate=gate, verdict=verdict, reason=reason, metrics=aggregate, tenants=tenants, **fields
    )


def _failures_first_decisive(
    aggregate: list[MetricJudgement], tenants: list[MetricJudgement]
) -> list[MetricJudgement]:
    """Failed judgements, critical before the rest, aggregate before per tenant.

    A tenant's failure on a metric that already failed over all tenants adds nothing a
    reader needs (with one tenant it is the same test), so it is left out.
    """
    failed_metrics = {j.metric for j in aggregate if j.verdict is Verdict.FAIL}
    failed = [j for j in aggregate if j.verdict is Verdict.FAIL] + [
        j for j in tenants if j.verdict is Verdict.FAIL and j.metric not in failed_metrics
    ]
    return sorted(failed, key=lambda j: (not j.critical, j.tenant is not None))


def _more(count: int, what: str) -> str:
    return f"; {_count(count, 'more judgement')} {what}" if count > 0 else ""


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _percent(confidence: float) -> str:
    """95%, or 99.8% for a Bonferroni-corrected level: as many digits as it needs."""
    return f"{confidence * 100:.3g}%"


# --- the replay gate -----------------------------------------------------------------------


def judge_replay(cases: Sequence[ReplayCase], config: GateConfig) -> GateResult:
    """Judge paired replays: past failures must improve, known successes must not regress.

    Over all tenants, the mean paired change (candidate - stable score) of past failures
    must be positive and at least `min_effect`: improvements must outweigh what got worse.
    Known successes, over all tenants and for each tenant with `min_tenant_samples` cases,
    fail the gate when their mean paired drop exceeds `tolerance` and its Student-t interval
    excludes no change; past failures of a tenant are held to the same do-no-harm rule
    (a fix usually targets some tenants, so it is not required of each). Fewer than
    `replay_min_cases` past failures or known successes make the gate marginal.
    """
    failures = [case for case in cases if not case.recorded_success]
    successes = [case for case in cases if case.recorded_success]
    threshold = config.replay_pass_score
    fixed = [c.trajectory_id for c in failures if c.baseline_score < threshold <= c.candidate_score]
    broken = [
        c.trajectory_id for c in successes if c.candidate_score < threshold <= c.baseline_score
    ]
    aggregate = [_failures_improve(failures, config), _successes_hold(successes, config)]
    tenants = _replay_tenants(REPLAY_FAILURES, failures, config) + _replay_tenants(
        REPLAY_SUCCESSES, successes, config
    )

    def passed() -> str:  # only called when both judgements passed, so the deltas are set
        return (
            f"past failures improved by {aggregate[0].delta:+.3g} on average "
            f"({len(fixed)} of {len(failures)} fixed), known successes held within tolerance "
            f"{config.tolerance:g} ({len(broken)} of {len(successes)} broken)"
        )

    result = _gate_result("replay", aggregate, tenants, passed, fixed=fixed, broken=broken)
    if result.verdict is Verdict.FAIL and broken:
        return result.model_copy(update={"reason": f"{result.reason}; broken: {_ids(broken)}"})
    return result


def _paired(cases: Sequence[ReplayCase]) -> list[float]:
    return [case.candidate_score - case.baseline_score for case in cases]


def _paired_interval(cases: Sequence[ReplayCase], confidence: float) -> tuple[float, float, float]:
    """Mean paired change with its Student-t interval; callers ensure there are cases."""
    interval = mean_interval(_paired(cases), confidence)
    if interval is None:
        raise ValueError("a paired interval needs at least one replayed case")
    return interval


def _paired_effect(changes: Sequence[float]) -> float:
    """P(candidate scores higher than stable on a case) + 0.5 P(same score)."""
    wins = sum(1.0 if change > 0 else 0.5 if change == 0 else 0.0 for change in changes)
    return wins / len(changes)


def _paired_judgement(
    metric: str,
    tenant: str | None,
    cases: Sequence[ReplayCase],
    confidence: float,
    verdict: Verdict,
    reason: str,
    *,
    judged: bool = True,
) -> MetricJudgement:
    changes = _paired(cases)
    interval = mean_interval(changes, confidence)
    return MetricJudgement(
        metric=metric,
        tenant=tenant,
        verdict=verdict,
        n_baseline=len(cases),
        n_candidate=len(cases),
        baseline_mean=_mean([case.baseline_score for case in cases]),
        candidate_mean=_mean([case.candidate_score for case in cases]),
        delta=interval[0] if interval else None,
        delta_low=interval[1] if interval else None,
        delta_high=interval[2] if interval else None,
        effect=_paired_effect(changes) if changes else None,
        judged=judged,
        reason=reason,
    )


def _replay_too_few(
    metric: str, tenant: str | None, cases: Sequence[ReplayCase], config: GateConfig
) -> MetricJudgement:
    """Marginal over all tenants; for one tenant, reported but not judged."""
    needed = config.replay_min_cases if tenant is None else config.min_tenant_samples
    verdict = "too few to judge" if tenant is None else "not judged, too few"
    counts = f"{len(cases)} replayed; {needed} needed"
    reason = f"{_replay_subject(metric, tenant)}: {verdict} ({counts})"
    return _paired_judgement(
        metric,
        tenant,
        cases,
        config.confidence,
        Verdict.MARGINAL,
        reason,
        judged=tenant is None,
    )


def _replay_subject(metric: str, tenant: str | None) -> str:
    what = "past failures" if metric == REPLAY_FAILURES else "known successes"
    return f"{what} for tenant {tenant}" if tenant is not None else what


def _failures_improve(failures: Sequence[ReplayCase], config: GateConfig) -> MetricJudgement:
    """Past failures, over all tenants: the candidate must fix more than it worsens."""
    if len(failures) < config.replay_min_cases:
        return _replay_too_few(REPLAY_FAILURES, None, failures, config)
    mean, _, high = _paired_interval(failures, config.confidence)
    needed = config.min_effect
    goal = f"the {needed:g} improvement needed" if needed > 0 else "a clear improvement"
    change = f"{mean:+.3g} on average ({_percent(config.confidence)} interval up to {high:+.3g})"
    if mean > 0 and mean >= needed:
        verdict, reason = Verdict.PASS, f"past failures improved by {change}"
    elif high > 0 and high >= needed:
        verdict = Verdict.MARGINAL
        reason = f"past failures changed by {change}, not yet {goal}"
    else:
        verdict = Verdict.FAIL
        reason = f"past failures did not improve enough: changed by {change}, short of {goal}"
    return _paired_judgement(REPLAY_FAILURES, None, failures, config.confidence, verdict, reason)


def _successes_hold(successes: Sequence[ReplayCase], config: GateConfig) -> MetricJudgement:
    """Known successes, over all tenants: they must not regress beyond tolerance."""
    if len(successes) < config.replay_min_cases:
        return _replay_too_few(REPLAY_SUCCESSES, None, successes, config)
    return _do_no_harm(REPLAY_SUCCESSES, None, successes, config, config.confidence)


def _do_no_harm(
    metric: str,
    tenant: str | None,
    cases: Sequence[ReplayCase],
    config: GateConfig,
    confidence: float,
) -> MetricJudgement:
    """Fail when the mean paired drop exceeds tolerance and its interval excludes no change."""
    mean, low, high = _paired_interval(cases, confidence)
    what = _replay_subject(metric, tenant)
    interval = f"{_percent(confidence)} interval {low:+.3g} to {high:+.3g}"
    if -mean <= config.tolerance:
        verdict = Verdict.PASS
        reason = (
            f"{what} did not regress: changed by {mean:+.3g} on average "
            f"(tolerance {config.tolerance:g})"
        )
    else:
        verdict = Verdict.FAIL if high < 0 else Verdict.MARGINAL
        so = "and significantly so" if high < 0 else "but not significantly so"
        reason = (
            f"{what} regressed by {-mean:.3g} on average, beyond tolerance "
            f"{config.tolerance:g}, {so} ({interval})"
        )
    return _paired_judgement(metric, tenant, cases, confidence, verdict, reason)


def _replay_tenants(
    metric: str, cases: Sequence[ReplayCase], config: GateConfig
) -> list[MetricJudgement]:
    """Per tenant, do no harm; Bonferroni-corrected over the tenants with enough cases."""
    grouped: defaultdict[str, list[ReplayCase]] = defaultdict(list)
    for case in cases:
        grouped[case.tenant].append(case)
    enough = {t for t, group in grouped.items() if len(group) >= config.min_tenant_samples}
    confidence = _bonferroni(config.confidence, len(enough))
    return [
        _do_no_harm(metric, tenant, grouped[tenant], config, confidence)
        if tenant in enough
        else _replay_too_few(metric, tenant, grouped[tenant], config)
        for tenant in sorted(grouped)
    ]


def _ids(ids: Sequence[str], shown: int = 10) -> str:
    listed = ", ".join(ids[:shown])
    return listed if len(ids) <= shown else f"{listed} and {len(ids) - shown} more"
