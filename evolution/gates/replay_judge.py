"""The replay gate's judge: paired replays; past failures should improve, past successes hold."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from evolution.gates.live import bonferroni, mean_of
from evolution.gates.records import (
    REPLAY_FAILURES,
    REPLAY_SUCCESSES,
    GateConfig,
    GateResult,
    MetricJudgement,
    ReplayCase,
    Verdict,
)
from evolution.gates.verdict import gate_result, percent_text
from evolution.stats import mean_interval

__all__ = ["judge_replay"]


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

    result = gate_result("replay", aggregate, tenants, passed, fixed=fixed, broken=broken)
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
        baseline_mean=mean_of([case.baseline_score for case in cases]),
        candidate_mean=mean_of([case.candidate_score for case in cases]),
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
    change = (
        f"{mean:+.3g} on average ({percent_text(config.confidence)} interval up to {high:+.3g})"
    )
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
    interval = f"{percent_text(confidence)} interval {low:+.3g} to {high:+.3g}"
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
    confidence = bonferroni(config.confidence, len(enough))
    return [
        _do_no_harm(metric, tenant, grouped[tenant], config, confidence)
        if tenant in enough
        else _replay_too_few(metric, tenant, grouped[tenant], config)
        for tenant in sorted(grouped)
    ]


def _ids(ids: Sequence[str], shown: int = 10) -> str:
    listed = ", ".join(ids[:shown])
    return listed if len(ids) <= shown else f"{listed} and {len(ids) - shown} more"
