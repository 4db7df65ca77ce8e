"""The statistics gates and window analysis share: intervals, a rank test, a bootstrap.

One implementation of each, so a decision record and a gate verdict computed from the same
numbers agree, and a reader can see exactly how a number was made. numpy and scipy are
imported inside the functions: `import evolution.gates` (which workflows do, for its models)
stays fast, and scipy.stats alone takes about a second to import.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["bootstrap_mean_delta", "mann_whitney", "mean_interval", "wilson_interval"]

# Resamples are drawn in blocks of about this many values, so a bootstrap over a large
# window needs bounded memory however many resamples it asks for.
_BOOTSTRAP_BLOCK_VALUES = 1_000_000


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


def bootstrap_mean_delta(
    baseline: Sequence[float],
    candidate: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """The difference of means (candidate - baseline) with a percentile bootstrap interval.

    Each side is resampled on its own (the two groups are independent sessions). A fixed
    `seed` makes the interval reproducible, so a recorded verdict can be recomputed.

    Returns:
        (delta, low, high).
    """
    import numpy as np

    _check_confidence(confidence)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    base = np.asarray(_finite(baseline, "baseline"))
    cand = np.asarray(_finite(candidate, "candidate"))
    if base.size == 0 or cand.size == 0:
        raise ValueError("bootstrap_mean_delta needs at least one baseline and candidate value")
    rng = np.random.default_rng(seed)
    deltas = np.concatenate(
        [
            _resampled_means(cand, count, rng) - _resampled_means(base, count, rng)
            for count in _blocks(resamples, base.size + cand.size)
        ]
    )
    alpha = 1.0 - confidence
    low, high = np.quantile(deltas, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(cand.mean() - base.mean()), float(low), float(high)


def _blocks(resamples: int, values_per_resample: int) -> list[int]:
    """Resample counts per block, so no block holds much more than the memory bound."""
    per_block = max(1, _BOOTSTRAP_BLOCK_VALUES // values_per_resample)
    full, rest = divmod(resamples, per_block)
    return [per_block] * full + ([rest] if rest else [])


def _resampled_means(values: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """`count` means of `values` resampled with replacement."""
    picks = rng.integers(0, values.size, size=(count, values.size))
    return values[picks].mean(axis=1)
