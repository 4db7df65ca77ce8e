"""The statistics gates and window analysis share: intervals and a rank test.

One implementation of each, so a decision record and a gate verdict computed from the same
numbers agree, and a reader can see exactly how a number was made. scipy is imported inside
the functions: `import evolution.gates` (which workflows do, for its models) stays fast, and
scipy.stats alone takes about a second to import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["mann_whitney", "mean_interval", "wilson_interval"]


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence}")


def _finite(values: Sequence[float], side: str) -> list[float]:
    """The values as floats; NaN or infinity would silently poison every statistic."""
    floats = [float(value) for value in values]
    if not all(math.isfinite(value) for value in floats):
        raise ValueError(f"{side} values must be finite numbers (found NaN or infinity)")
    return floats


def _z(confidence: float) -> float:
    """The two-sided standard normal quantile for `confidence` (1.96 for 0.95)."""
    from scipy.special import ndtri

    return float(ndtri(1.0 - (1.0 - confidence) / 2.0))


def wilson_interval(successes: int, total: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a proportion: honest near 0 and 1 and for small totals.

    The normal ("Wald") interval collapses to a point at 0% or 100% and can leave [0, 1];
    Wilson's does neither, which matters for rare failures.

    Returns:
        (low, high) within [0, 1]; (0.0, 1.0) when `total` is 0 (nothing is known).
    """
    _check_confidence(confidence)
    if total < 0 or not 0 <= successes <= total:
        raise ValueError(f"need 0 <= successes <= total, got {successes} of {total}")
    if total == 0:
        return 0.0, 1.0
    z = _z(confidence)
    rate = successes / total
    z2_n = z * z / total
    centre = (rate + z2_n / 2.0) / (1.0 + z2_n)
    half = z * math.sqrt(rate * (1.0 - rate) / total + z2_n / (4.0 * total)) / (1.0 + z2_n)
    # At 0 and at `total` the exact bound is the rate itself; rounding must not move it.
    low = 0.0 if successes == 0 else max(0.0, min(rate, centre - half))
    high = 1.0 if successes == total else min(1.0, max(rate, centre + half))
    return low, high


def mean_interval(
    values: Sequence[float], confidence: float = 0.95
) -> tuple[float, float, float] | None:
    """A mean with its Student-t confidence interval.

    Returns:
        (mean, low, high); None when there are no values; low = high = mean for one value
        (no spread can be estimated from it) or for identical values.
    """
    _check_confidence(confidence)
    floats = _finite(values, "mean_interval")
    if not floats:
        return None
    n = len(floats)
    mean = math.fsum(floats) / n
    if n == 1:
        return mean, mean, mean
    from scipy.stats import t as student_t

    variance = math.fsum((value - mean) ** 2 for value in floats) / (n - 1)
    half = float(student_t.ppf(1.0 - (1.0 - confidence) / 2.0, n - 1)) * math.sqrt(variance / n)
    return mean, mean - half, mean + half


def mann_whitney(
    baseline: Sequence[float], candidate: Sequence[float]
) -> tuple[float, float, float]:
    """The Mann-Whitney U test of candidate against baseline, with its effect size.

    Rank-based, so it suits rewards that are bounded, skewed or mostly 0/1, as Kayenta's
    judge does for canary metrics.

    Returns:
        (u, p, effect): `u` counts the (baseline, candidate) pairs where the candidate is
        larger, ties counting one half; `p` is two-sided; `effect` = u / (n_b * n_c) is the
        probability of superiority P(candidate > baseline) + 0.5 P(equal), in [0, 1], 0.5
        when neither side tends to be larger.
    """
    base = _finite(baseline, "baseline")
    cand = _finite(candidate, "candidate")
    if not base or not cand:
        raise ValueError("mann_whitney needs at least one baseline and one candidate value")
    pairs = len(base) * len(cand)
    if min(base) == max(base) == min(cand) == max(cand):
        # All values tie: no evidence of a difference; scipy would divide by a zero variance.
        return pairs / 2.0, 1.0, 0.5
    from scipy.stats import mannwhitneyu

    result = mannwhitneyu(cand, base, alternative="two-sided")
    u = float(result.statistic)
    return u, min(1.0, max(0.0, float(result.pvalue))), u / pairs
