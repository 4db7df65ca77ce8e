"""Anytime-valid intervals of a difference of means, and the sessions they need.

A canary is looked at after every step and extension. A fixed-horizon interval looked at
that often promotes a regression far more often than its confidence says; a confidence
sequence covers the true difference at every look at once, however many there are and
whenever they stop. This one is the two-sided normal mixture (Robbins; Howard, Ramdas,
McAuliffe and Sekhon 2021), in information time I = 1 / Var(delta estimate), as in the
mixture SPRT's always-valid intervals (Johari, Pekelis and Walsh) and the asymptotic
confidence sequences of Waudby-Smith et al.: I * (estimate - delta) is a Brownian motion in
I whatever share of sessions each side gets at each step, so the sessions of every step
and extension can be pooled.

Every function takes floats or numpy arrays (the benchmark simulates thousands of canaries
at once through the same functions the judge calls).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "fixed_half_width",
    "information",
    "mixture_half_width",
    "mixture_precision",
    "sessions_needed",
    "shrunk_variance",
]


def _z(probability: float) -> float:
    """The standard normal quantile."""
    from scipy.special import ndtri

    return float(ndtri(probability))


def mixture_precision(
    resolution: float, confidence: float, power: float, doublings: int = 4
) -> tuple[float, ...]:
    """The mixture's precisions: one tuned to tell `resolution` with `power`, one for each of
    twice, four times ... 2**doublings times it. They depend on the settings, never the data.

    A single precision is tightest at one information level I* (for I* it is I* / (2
    log(1/alpha) + log(1 + 2 log(1/alpha))), Waudby-Smith et al.) and loose far from it:
    tuned to the tolerance alone, a fix whose gain is many times the tolerance would wait
    for the sessions a tolerance-sized difference needs. An equal-weight mixture of several
    is still a martingale, so it keeps the coverage, and it is nearly as tight as the best
    of them at every size (it pays log of their number in the threshold).
    """
    if resolution <= 0:
        raise ValueError(f"the resolution to plan for must be positive, got {resolution}")
    alpha = 1.0 - confidence
    log_term = 2.0 * math.log(1.0 / alpha)
    return tuple(
        ((_z(1.0 - alpha / 2.0) + _z(power)) / (resolution * 2**k)) ** 2
        / (log_term + math.log(1.0 + log_term))
        for k in range(doublings + 1)
    )


def mixture_half_width(information: Any, precision: Any, confidence: float) -> Any:
    """Half width of the confidence sequence at `information` (1 / variance of the estimate).

    Each precision rho gives the mixture martingale sqrt(rho / (I + rho)) exp(S^2 / (2 (I +
    rho))) in S = I (estimate - delta); their average stays under 1/alpha at every look with
    probability 1 - alpha (Ville's inequality), so the interval is the S^2 where it reaches
    1/alpha, divided by I. One precision solves in closed form, sqrt((I + rho) log((I + rho)
    / (rho alpha^2))) / I; several by bisection.
    """
    import numpy as np
    from scipy.special import logsumexp

    alpha = 1.0 - confidence
    rho = np.atleast_1d(np.asarray(precision, dtype=float))
    given = np.asarray(information, dtype=float)
    finite = np.isfinite(given)
    info = np.where(finite, given, 1.0)[..., None]
    spread = info + rho

    def reaching(level: float) -> Any:  # S^2 where one precision alone reaches 1/level
        return (spread * np.log(spread / (rho * level**2))).min(-1)

    low, high = reaching(alpha), reaching(alpha / rho.size)
    threshold = math.log(1.0 / alpha) + math.log(rho.size)
    for _ in range(0 if rho.size == 1 else 40):
        middle = (low + high) / 2.0
        above = logsumexp(0.5 * np.log(rho / spread) + middle[..., None] / (2 * spread), -1)
        low, high = (
            np.where(above >= threshold, low, middle),
            np.where(above >= threshold, middle, high),
        )
    half = np.sqrt(high) / info[..., 0]
    return np.where(finite, half, 0.0)


def fixed_half_width(information: Any, confidence: float) -> Any:
    """The fixed-horizon normal interval's half width: valid at one planned look only."""
    import numpy as np

    return _z(1.0 - (1.0 - confidence) / 2.0) / np.sqrt(information)


def information(
    variance_baseline: Any, n_baseline: Any, variance_candidate: Any, n_candidate: Any
) -> Any:
    """1 / Var(candidate mean - baseline mean); infinite when neither side varies."""
    import numpy as np

    variance = np.asarray(variance_baseline / n_baseline + variance_candidate / n_candidate)
    with np.errstate(divide="ignore"):
        return np.where(variance > 0, 1.0 / np.maximum(variance, 1e-300), np.inf)


def shrunk_variance(squares: Any, n: Any, pooled: Any) -> Any:
    """One side's variance, shrunk by one pseudo-session towards both sides' pooled variance.

    A handful of sessions that happen to agree would otherwise claim a variance of zero and
    an interval of a point; the pseudo-session weighs nothing once there are many.

    Args:
        squares: the side's sum of squared deviations from its mean.
        n: the side's sessions.
        pooled: the variance of both sides' values together.
    """
    return (squares + pooled) / n


def sessions_needed(
    variance_baseline: float,
    variance_candidate: float,
    distance: float,
    confidence: float,
    power: float,
    precision: tuple[float, ...] | float | None = None,
) -> int:
    """Sessions per side for the interval to clear a margin `distance` away with `power`.

    The interval's bound must clear the margin although the estimate may fall short of the
    truth by z(power) standard errors: half_width(I) + z(power) / sqrt(I) <= distance, with
    I = n / (variance_baseline + variance_candidate). With `precision` None the interval is
    the fixed-horizon one, which gives the textbook n = (z(1 - alpha/2) + z(power))^2
    (var_b + var_c) / distance^2; with a mixture precision, the confidence sequence's.
    """
    if distance <= 0:
        raise ValueError(f"the distance to tell must be positive, got {distance}")
    spread = variance_baseline + variance_candidate
    if spread <= 0:
        return 1
    beta = _z(power)

    def enough(n: int) -> bool:
        info = n / spread
        half = (
            fixed_half_width(info, confidence)
            if precision is None
            else mixture_half_width(info, precision, confidence)
        )
        return float(half) + beta / math.sqrt(info) <= distance

    high = 1
    while not enough(high):
        high *= 2
    low = high // 2
    while high - low > 1:  # the smallest n that is enough: the bound shrinks as n grows
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high
