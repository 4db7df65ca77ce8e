"""A gate's verdict from its judgements: the first decisive failure, else pass or marginal."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from evolution.gates.records import Gate, GateResult, MetricJudgement, Verdict

__all__ = ["count_text", "gate_result", "percent_text"]


def gate_result(
    gate: Gate,
    aggregate: list[MetricJudgement],
    tenants: list[MetricJudgement],
    passed: Callable[[], str],
    holds: Sequence[MetricJudgement] = (),
    **fields: Any,
) -> GateResult:
    """Any fail fails the gate (critical ones named first); else an aggregate marginal, or a
    tenant in `holds` (one that may be hurt: `live.holds`), makes it marginal; else it
    passes. The reason is the judgement that decided it."""
    failures = _failures_first_decisive(aggregate, tenants)
    marginals = [j for j in aggregate if j.verdict is Verdict.MARGINAL] or list(holds)
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
    return f"; {count_text(count, 'more judgement')} {what}" if count > 0 else ""


def count_text(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def percent_text(confidence: float) -> str:
    """95%, or 99.8% for a Bonferroni-corrected level: as many digits as it needs."""
    return f"{confidence * 100:.3g}%"
