"""A difference of means from each side's sums, with CUPED where a covariate is known.

CUPED (Deng, Xu, Kohavi and Walker 2013): a value known before the experiment that
predicts the outcome (here a tenant's or task type's success before the canary) is
subtracted with the slope theta = cov(x, y) / var(x) of both sides pooled. The adjusted
difference estimates the same effect (the covariate's two means differ only by chance), with
the variance the covariate explains taken out.

Sums rather than samples, so the judge (one canary) and the benchmark (thousands of
simulated canaries, as numpy arrays) compute every estimate the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evolution.gates.sequential import information, shrunk_variance

__all__ = ["Estimate", "Moments", "estimate"]


@dataclass(frozen=True)
class Moments:
    """One side's count and sums of values y, covariates x and their products."""

    n: Any
    y: Any
    yy: Any
    x: Any = 0.0
    xx: Any = 0.0
    xy: Any = 0.0

    @classmethod
    def of(cls, values: Sequence[float], covariates: Sequence[float] | None = None) -> Moments:
        import numpy as np

        y = np.asarray(values, dtype=float)
        x = np.zeros_like(y) if covariates is None else np.asarray(covariates, dtype=float)
        return cls(len(y), y.sum(), (y * y).sum(), x.sum(), (x * x).sum(), (x * y).sum())

    def __add__(self, other: Moments) -> Moments:
        return Moments(*(a + b for a, b in zip(self._sums(), other._sums(), strict=True)))

    def _sums(self) -> tuple[Any, ...]:
        return (self.n, self.y, self.yy, self.x, self.xx, self.xy)

    def squares(self, theta: Any = 0.0) -> Any:
        """Sum of squared deviations of y - theta x from its mean."""
        syy = self.yy - self.y * self.y / self.n
        sxy = self.xy - self.x * self.y / self.n
        sxx = self.xx - self.x * self.x / self.n
        return syy - 2.0 * theta * sxy + theta * theta * sxx

    def mean(self, theta: Any = 0.0, centre: Any = 0.0) -> Any:
        """Mean of y - theta (x - centre)."""
        return (self.y - theta * (self.x - centre * self.n)) / self.n


@dataclass(frozen=True)
class Estimate:
    """candidate - baseline, each side's (shrunk) variance, and what a covariate saved."""

    delta: Any
    variance_baseline: Any
    variance_candidate: Any
    n_baseline: Any
    n_candidate: Any
    variance_reduction: Any = 0.0

    @property
    def information(self) -> Any:
        return information(
            self.variance_baseline, self.n_baseline, self.variance_candidate, self.n_candidate
        )


def estimate(baseline: Moments, candidate: Moments, *, adjust: bool = False) -> Estimate:
    """The difference of means; with `adjust`, CUPED on the covariate sums."""
    import numpy as np

    both = baseline + candidate
    theta = 0.0
    if adjust:
        sxx = both.xx - both.x * both.x / both.n
        sxy = both.xy - both.x * both.y / both.n
        with np.errstate(divide="ignore", invalid="ignore"):
            theta = np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), 0.0)
    centre = both.x / both.n
    pooled = np.maximum(both.squares(theta), 0.0) / np.maximum(both.n - 1, 1)
    variances = [
        shrunk_variance(np.maximum(side.squares(theta), 0.0), side.n, pooled)
        for side in (baseline, candidate)
    ]
    raw = [
        shrunk_variance(np.maximum(side.squares(), 0.0), side.n, both.squares() / (both.n - 1))
        for side in (baseline, candidate)
    ]
    spread = variances[0] / baseline.n + variances[1] / candidate.n
    raw_spread = raw[0] / baseline.n + raw[1] / candidate.n
    with np.errstate(divide="ignore", invalid="ignore"):
        reduction = np.where(raw_spread > 0, 1.0 - spread / raw_spread, 0.0)
    return Estimate(
        delta=candidate.mean(theta, centre) - baseline.mean(theta, centre),
        variance_baseline=variances[0],
        variance_candidate=variances[1],
        n_baseline=baseline.n,
        n_candidate=candidate.n,
        variance_reduction=reduction,
    )
