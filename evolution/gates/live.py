"""The live judge (shadow, canary): the candidate against stable, overall and per tenant.

Its intervals are confidence sequences (`sequential`): valid at every step and extension
of a canary at once, so the whole canary promotes a candidate that is worse than the
question allows no more often than 1 - confidence, however many looks it takes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evolution.gates.estimate import Estimate, Moments, estimate
from evolution.gates.records import (
    Gate,
    GateConfig,
    GateResult,
    MetricJudgement,
    MetricSamples,
    Question,
    Sample,
    Verdict,
)
from evolution.gates.sequential import mixture_half_width, mixture_precision, sessions_needed
from evolution.gates.verdict import count_text, gate_result, percent_text
from evolution.stats import mann_whitney

__all__ = [
    "bonferroni",
    "fails",
    "holds",
    "judge",
    "margin",
    "mean_of",
    "passes",
    "question_for",
]

_FIXES = {"memory", "skill", "harness", "tool_schema", "weights"}


@dataclass(frozen=True)
class _Subject:
    """What one judgement is about, and how to name it in a sentence."""

    metric: str
    tenant: str | None
    higher_is_better: bool
    critical: bool
    hold: bool = False  # a tenant's judgement of the primary metric: it may hold a pass

    def __str__(self) -> str:
        kind = "critical metric" if self.critical else "metric"
        scope = f" for tenant {self.tenant}" if self.tenant is not None else ""
        return f"{kind} {self.metric}{scope}"


def question_for(action: str | None) -> Question:
    """What a change must show: a fix (memory, harness, tool schema, weights) a gain; any
    other change (a person's cost cut, say) only that it costs no more than the tolerance."""
    return Question.SUPERIORITY if action in _FIXES else Question.NON_INFERIORITY


def judge(
    gate: Gate,
    metrics: Sequence[MetricSamples],
    config: GateConfig,
    *,
    step: int | None = None,
    weight: float | None = None,
    question: Question = Question.NON_INFERIORITY,
) -> GateResult:
    """Judge candidate against baseline on every metric, over all tenants and per tenant.

    The primary metric (`config.primary_metric`) must answer `question` (or
    `config.question`, which overrides it) with a confidence sequence that holds at every
    look at once: superiority passes once the interval is above 0, non-inferiority once it
    is above -tolerance; an interval still straddling that margin is marginal, and one
    wholly on the wrong side of it fails. Other metrics are guardrails: they fail when the
    interval shows the candidate worse by more than `tolerance`, and are marginal when the
    observed drop is beyond it but the interval is not yet sure. Too few samples are
    marginal. A tenant's judgements fail the gate on confident harm to that tenant, and a
    judged tenant whose primary metric may have dropped by more than
    `config.tenant_tolerance` holds a pass (marginal; `holds`). Per-tenant intervals are
    Bonferroni-corrected over the tenants judged, so many tenants do not fail a good
    candidate by chance.
    """
    names = [metric.name for metric in metrics]
    if len(set(names)) != len(names):
        raise ValueError(f"metric names must be unique, got {names}")
    asked = config.question or question
    aggregate = [
        _judge_aggregate(metric, config, _asked(metric, config, asked)) for metric in metrics
    ]
    tenants = [j for metric in metrics for j in _judge_tenants(metric, config)]
    primary = next((j for j in aggregate if j.question is not Question.NO_HARM), None)

    def passed() -> str:
        judged = len({j.tenant for j in tenants if j.judged})
        guardrails = len(aggregate) - (primary is not None)
        said = [_shown(primary, config)] if primary is not None else []
        if guardrails:
            metrics = count_text(guardrails, "guardrail metric")
            said.append(f"{metrics} within tolerance {config.tolerance:g}")
        return (
            f"{', '.join(said)} at {percent_text(config.confidence)} confidence over every "
            f"look, no tenant confidently worse ({count_text(judged, 'tenant')} judged)"
        )

    holds = [j for j in tenants if j.held]
    result = gate_result(gate, aggregate, tenants, passed, holds, step=step, weight=weight)
    if primary is None:
        return result
    sessions = min(primary.n_baseline, primary.n_candidate)
    return result.model_copy(
        update={
            "question": primary.question,
            "sessions_needed": primary.sessions_needed,
            "sessions_to_answer": _to_answer_all(primary, holds, sessions),
            "sessions": sessions,
        }
    )


def _to_answer_all(
    primary: MetricJudgement, held: Sequence[MetricJudgement], sessions: int
) -> int | None:
    """Sessions a side that would answer the question and show every held tenant within
    the tenant tolerance, if each is what it looks like so far: a tenant's own need grows
    by the share of the sessions it brings. None where more would not answer one of them."""
    if primary.verdict is Verdict.PASS:
        needs = [sessions]
    elif primary.sessions_to_answer is None:
        return None
    else:
        needs = [primary.sessions_to_answer]
    for tenant in held:
        brought = min(tenant.n_baseline, tenant.n_candidate)
        if tenant.sessions_to_answer is None or not brought:
            return None
        needs.append(math.ceil(tenant.sessions_to_answer * sessions / brought))
    return max(needs)


def _asked(metric: MetricSamples, config: GateConfig, question: Question) -> Question:
    return question if metric.name == config.primary_metric else Question.NO_HARM


def _shown(primary: MetricJudgement, config: GateConfig) -> str:
    if primary.question is Question.SUPERIORITY:
        return f"{primary.metric} shown better (superiority)"
    return f"{primary.metric} shown no worse than {config.tolerance:g} (non-inferiority)"


def _judge_aggregate(
    metric: MetricSamples, config: GateConfig, question: Question
) -> MetricJudgement:
    subject = _Subject(
        metric.name, None, metric.higher_is_better, metric.name in config.critical_metrics
    )
    if min(len(metric.baseline), len(metric.candidate)) < config.min_samples:
        return _too_few(subject, metric.baseline, metric.candidate, config, judged=True)
    return _compare(subject, metric.baseline, metric.candidate, config, question, config.confidence)


def _judge_tenants(metric: MetricSamples, config: GateConfig) -> list[MetricJudgement]:
    hold = metric.name == config.primary_metric and config.tenant_tolerance is not None
    baseline, candidate = _by_tenant(metric.baseline), _by_tenant(metric.candidate)
    tenants = sorted(baseline.keys() | candidate.keys())
    enough = {
        tenant
        for tenant in tenants
        if min(len(baseline[tenant]), len(candidate[tenant])) >= config.min_tenant_samples
    }
    confidence = bonferroni(config.confidence, len(enough))
    critical = metric.name in config.critical_metrics
    judgements = []
    for tenant in tenants:
        subject = _Subject(metric.name, tenant, metric.higher_is_better, critical, hold)
        if tenant in enough:
            judgements.append(
                _compare(
                    subject,
                    baseline[tenant],
                    candidate[tenant],
                    config,
                    Question.NO_HARM,
                    confidence,
                )
            )
        else:
            judgements.append(
                _too_few(subject, baseline[tenant], candidate[tenant], config, judged=False)
            )
    return judgements


def _by_tenant(samples: Sequence[Sample]) -> defaultdict[str, list[Sample]]:
    grouped: defaultdict[str, list[Sample]] = defaultdict(list)
    for sample in samples:
        grouped[sample.tenant].append(sample)
    return grouped


def bonferroni(confidence: float, tests: int) -> float:
    """The per-test confidence that keeps the family's false-alarm rate at 1 - confidence."""
    return 1.0 - (1.0 - confidence) / max(1, tests)


def _average(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def mean_of(values: Sequence[float]) -> float | None:
    return _average(values) if values else None


def _values(samples: Sequence[Sample]) -> list[float]:
    return [sample.value for sample in samples]


def _too_few(
    subject: _Subject,
    baseline: Sequence[Sample],
    candidate: Sequence[Sample],
    config: GateConfig,
    *,
    judged: bool,
) -> MetricJudgement:
    needed = config.min_samples if judged else config.min_tenant_samples
    counts = f"{len(baseline)} baseline, {len(candidate)} candidate; {needed} needed on each side"
    verdict = "too few samples to judge" if judged else "not judged, too few samples"
    return MetricJudgement(
        metric=subject.metric,
        tenant=subject.tenant,
        verdict=Verdict.MARGINAL,
        n_baseline=len(baseline),
        n_candidate=len(candidate),
        baseline_mean=mean_of(_values(baseline)),
        candidate_mean=mean_of(_values(candidate)),
        critical=subject.critical,
        judged=judged,
        reason=f"{subject}: {verdict} ({counts})",
    )


def _moments(samples: Sequence[Sample], adjust: bool) -> Moments:
    covariates = [sample.covariate for sample in samples] if adjust else None
    return Moments.of(_values(samples), covariates)


def _has_covariates(*sides: Sequence[Sample]) -> bool:
    return all(sample.covariate is not None for side in sides for sample in side)


def _compare(
    subject: _Subject,
    baseline: Sequence[Sample],
    candidate: Sequence[Sample],
    config: GateConfig,
    question: Question,
    confidence: float,
) -> MetricJudgement:
    """One metric in one scope, with enough samples: pass, marginal or fail."""
    adjust = _has_covariates(baseline, candidate)
    found = estimate(_moments(baseline, adjust), _moments(candidate, adjust), adjust=adjust)
    precision = mixture_precision(config.resolution, confidence, config.power)
    delta = float(found.delta)
    half = float(mixture_half_width(found.information, precision, confidence))
    low, high = delta - half, delta + half
    gain = delta if subject.higher_is_better else -delta  # in the metric's better direction
    gain_low, gain_high = gain - half, gain + half
    verdict = _verdict(question, gain, gain_low, gain_high, config.tolerance)
    tenant_tolerance = config.tenant_tolerance
    held = (
        subject.hold
        and tenant_tolerance is not None
        and verdict is not Verdict.FAIL
        and bool(holds(gain_low, tenant_tolerance))
    )
    if held:
        verdict = Verdict.MARGINAL
    needed = None if subject.tenant is not None else _planned(found, config, confidence, precision)
    to_answer = None
    if subject.tenant is None and question is not Question.NO_HARM:
        distance = gain - margin(question, config.tolerance)
        to_answer = _to_answer(found, config, confidence, precision, distance)
    elif held and tenant_tolerance is not None:
        to_answer = _to_answer(found, config, confidence, precision, gain + tenant_tolerance)
    base, cand = _values(baseline), _values(candidate)
    _, _, effect = mann_whitney(base, cand)
    words = _Words(subject, question, config, confidence, len(base), len(cand), needed, to_answer)
    return MetricJudgement(
        metric=subject.metric,
        tenant=subject.tenant,
        verdict=verdict,
        n_baseline=len(base),
        n_candidate=len(cand),
        baseline_mean=_average(base),
        candidate_mean=_average(cand),
        delta=delta,
        delta_low=low,
        delta_high=high,
        effect=effect,
        critical=subject.critical,
        question=question,
        confidence=confidence,
        sessions_needed=needed,
        sessions_to_answer=to_answer,
        held=held,
        variance_reduction=float(found.variance_reduction) if adjust else None,
        reason=words.reason(verdict, gain, gain_low, gain_high, held),
    )


def _planned(
    found: Estimate, config: GateConfig, confidence: float, precision: tuple[float, ...]
) -> int:
    """Sessions a side to tell a `resolution`-sized difference with `power`, at the
    variances seen so far."""
    return sessions_needed(
        float(found.variance_baseline),
        float(found.variance_candidate),
        config.resolution,
        confidence,
        config.power,
        precision,
    )


def _to_answer(
    found: Estimate,
    config: GateConfig,
    confidence: float,
    precision: tuple[float, ...],
    distance: float,
) -> int | None:
    """Sessions a side that would answer the question if the change is what it looks like
    so far (its estimate `distance` past the margin); None when it looks no better than
    the margin, where more sessions would not answer it."""
    if distance <= 0:
        return None
    return sessions_needed(
        float(found.variance_baseline),
        float(found.variance_candidate),
        distance,
        confidence,
        config.power,
        precision,
    )


def holds(low: Any, tenant_tolerance: Any) -> Any:
    """Whether a judged tenant holds a pass: while the low end of its interval of the gain
    (over every look, Bonferroni-corrected) is at or below -tenant_tolerance, a drop beyond
    what one tenant may take is not yet ruled out. Whatever the question: a fix that helps
    most tenants, or a cost cut within the tolerance overall, must not buy that with one
    tenant's loss, and the rule is the same test a confidence sequence keeps valid however
    often the canary looks, so a harmed tenant slips through at most 1 - confidence of
    the time. Arrays work too."""
    return low <= -tenant_tolerance


def margin(question: Question, tolerance: Any) -> Any:
    """The improvement an interval must stay above: 0 for superiority, -tolerance else."""
    return 0.0 * tolerance if question is Question.SUPERIORITY else -tolerance


def passes(question: Question, gain: Any, low: Any, tolerance: Any) -> Any:
    """Superiority and non-inferiority pass once the whole interval is above the margin; a
    guardrail passes while the observed change is within tolerance. Arrays work too."""
    if question is Question.NO_HARM:
        return gain >= -tolerance
    return low > margin(question, tolerance)


def fails(question: Question, high: Any, tolerance: Any) -> Any:
    """Fails once the whole interval is below the margin (-tolerance for a guardrail)."""
    return high < margin(question, tolerance)


def _verdict(question: Question, gain: float, low: float, high: float, tolerance: float) -> Verdict:
    if fails(question, high, tolerance):
        return Verdict.FAIL
    if passes(question, gain, low, tolerance):
        return Verdict.PASS
    return Verdict.MARGINAL


@dataclass(frozen=True)
class _Words:
    """How one judgement reads."""

    subject: _Subject
    question: Question
    config: GateConfig
    confidence: float
    n_baseline: int
    n_candidate: int
    needed: int | None
    to_answer: int | None

    def reason(
        self, verdict: Verdict, gain: float, low: float, high: float, held: bool = False
    ) -> str:
        tolerance = self.config.tolerance
        change = "better" if gain >= 0 else "worse"
        interval = (
            f"{percent_text(self.confidence)} interval of the gain over every look "
            f"{low:+.3g} to {high:+.3g}"
        )
        at = f"{self.subject} is {change} by {abs(gain):.3g}"
        if self.question is Question.NO_HARM:
            if verdict is Verdict.PASS:
                return f"{self.subject} holds ({gain:+.3g}) within tolerance {tolerance:g}"
            if held:
                return (
                    f"{at}, not yet shown within tenant tolerance "
                    f"{self.config.tenant_tolerance:g}: a larger drop is not ruled out, which "
                    f"holds the pass ({interval}){self.tenant_plan()}"
                )
            so = "and confidently so" if verdict is Verdict.FAIL else "but not confidently so"
            return f"{at}, beyond tolerance {tolerance:g}, {so} ({interval})"
        goal = (
            "shown better"
            if self.question is Question.SUPERIORITY
            else f"shown no worse than {tolerance:g}"
        )
        asked = self.question.value.replace("_", "-")
        if verdict is Verdict.PASS:
            return f"{at}: {goal} ({asked}; {interval})"
        if verdict is Verdict.FAIL:
            worse = (
                "not better"
                if self.question is Question.SUPERIORITY
                else f"worse than tolerance {tolerance:g}"
            )
            return f"{at}: confidently {worse} ({asked}; {interval})"
        return f"{at}, not yet {goal} ({asked}; {interval}){self.plan()}"

    def tenant_plan(self) -> str:
        if self.to_answer is None:
            return "; at what it shows so far, more sessions would not rule it out"
        has = min(self.n_baseline, self.n_candidate)
        return (
            f"; ~{self.to_answer} sessions a side of this tenant would rule it out, at what "
            f"it shows so far; has {has}"
        )

    def plan(self) -> str:
        if self.needed is None:
            return ""
        kind = "gain" if self.question is Question.SUPERIORITY else "drop"
        has = min(self.n_baseline, self.n_candidate)
        return (
            f"; needs ~{self.needed} sessions a side to tell a {self.config.resolution:g} "
            f"{kind}; has {has}"
        )
