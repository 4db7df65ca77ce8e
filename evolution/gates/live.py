"""The live judge (shadow, canary): the candidate against stable, overall and per tenant."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from evolution.gates.records import (
    Gate,
    GateConfig,
    GateResult,
    MetricJudgement,
    MetricSamples,
    Sample,
    Verdict,
)
from evolution.gates.verdict import count_text, gate_result, percent_text
from evolution.stats import bootstrap_mean_delta, mann_whitney

__all__ = ["bonferroni", "judge", "mean_of"]


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
            f"{count_text(len(aggregate), 'metric')} within tolerance {config.tolerance:g} at "
            f"{percent_text(config.confidence)} confidence, no tenant significantly worse "
            f"({count_text(judged, 'tenant')} judged)"
        )

    return gate_result(gate, aggregate, tenants, passed, step=step, weight=weight)


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
    confidence = bonferroni(config.confidence, len(enough))
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


def bonferroni(confidence: float, tests: int) -> float:
    """The per-test confidence that keeps the family's false-alarm rate at 1 - confidence."""
    return 1.0 - (1.0 - confidence) / max(1, tests)


def _average(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def mean_of(values: Sequence[float]) -> float | None:
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
        baseline_mean=mean_of(baseline),
        candidate_mean=mean_of(candidate),
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
        evidence = f"{percent_text(confidence)} interval of the delta {low:+.4g} to {high:+.4g}"
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
