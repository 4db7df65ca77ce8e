"""How often a whole canary promotes, by true effect, for the old live judge and the new one.

Simulated canaries (thousands at once, as numpy arrays) walk the workflow's loop: a look
after each step and extension, pass -> next step, marginal -> extend up to
`max_extensions`, fail -> stop; a step still marginal at its limit stops the canary. Every
look adds `per look` fresh sessions a side. The new judge looks at all of the canary's
sessions so far through the live judge's own functions (`evolution.gates.estimate`,
`sequential`, `live.passes`/`fails`); the old one, as it judged before, at the look's
sessions (as the issue's simulation did): pass when the observed drop is within tolerance,
fail when it is beyond and Mann-Whitney says p < 1 - confidence, per tenant Bonferroni-
corrected. A drop or a neutral change asks non-inferiority (a cost cut's question, the one a
regression could slip through); the +0.2 fix asks superiority.

    .venv/bin/python -m benchmarks.gates [--runs 1000] [--write]
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from evolution.gates import GateConfig, Question
from evolution.gates.estimate import Moments, estimate
from evolution.gates.live import bonferroni, fails, passes
from evolution.gates.sequential import mixture_half_width, mixture_precision, sessions_needed

FIX = 0.20  # the effect a fix brings
EFFECTS = (0.0, -0.05, -0.10, -0.20, FIX)
PER_LOOK = (30, 60, 150)
LOOKS = ((1, 2), (3, 2))  # (steps, max_extensions): up to 3 and up to 9 looks
CONFIG = GateConfig(min_samples=10, min_tenant_samples=5)
RESULTS = Path(__file__).with_name("RESULTS.md")


@dataclass(frozen=True)
class World:
    """Who the sessions come from and how their rewards are drawn."""

    name: str
    kind: str  # binary, continuous (beta) or skewed (log-normal, mean-preserving)
    shares: tuple[float, ...]
    means: tuple[float, ...]  # each tenant's mean reward before the change (its covariate)

    def tenants(self, n: int) -> np.ndarray:
        """Each session's tenant, interleaved so every prefix keeps the shares."""
        slots = np.repeat(
            np.arange(len(self.shares)), np.round(np.array(self.shares) * 30).astype(int)
        )
        return np.resize(np.random.default_rng(0).permutation(slots), n)

    def draw(self, rng: np.random.Generator, effect: float, runs: int, n: int) -> np.ndarray:
        means = np.array(self.means)[self.tenants(n)] + effect
        if self.kind == "binary":
            return (rng.random((runs, n)) < np.clip(means, 0.0, 1.0)).astype(float)
        if self.kind == "continuous":
            mean = np.clip(means, 0.01, 0.99)
            return rng.beta(4.0 * mean, 4.0 * (1.0 - mean), size=(runs, n))
        return means * rng.lognormal(-0.5, 1.0, size=(runs, n))

    def variance(self, effect: float = 0.0) -> float:
        """One session's reward variance (a large draw)."""
        return float(self.draw(np.random.default_rng(1), effect, 1, 200_000).var())


WORLDS = (
    World("binary", "binary", (1 / 3, 1 / 3, 1 / 3), (0.8, 0.8, 0.8)),
    World("continuous", "continuous", (1 / 3, 1 / 3, 1 / 3), (0.7, 0.7, 0.7)),
    World("skewed", "skewed", (1 / 3, 1 / 3, 1 / 3), (0.8, 0.8, 0.8)),
    World("tenant-imbalanced", "binary", (0.6, 0.3, 0.1), (0.75, 0.5, 0.3)),
)


@dataclass(frozen=True)
class Outcome:
    promoted: float  # share of canaries promoted
    early: float  # share whose question was answered (a pass) within the first two looks
    stopped_first: float  # share failed at the first look


class _Side:
    """One side's running sums per tenant over the canary so far: what the new judge reads."""

    def __init__(self, world: World, runs: int) -> None:
        tenants = len(world.shares)
        self.means = world.means
        self.counts = np.zeros(tenants)
        self.ys = np.zeros((tenants, runs))
        self.yys = np.zeros((tenants, runs))

    def add(self, values: np.ndarray, tenants: np.ndarray) -> None:
        for k in range(len(self.counts)):
            mask = tenants == k
            self.counts[k] += mask.sum()
            self.ys[k] += values[:, mask].sum(1)
            self.yys[k] += (values[:, mask] ** 2).sum(1)

    def moments(self, tenant: int | None = None) -> Moments:
        """All tenants' sums (or one's), with each tenant's mean before as its covariate."""
        chosen = range(len(self.counts)) if tenant is None else [tenant]
        parts = [
            Moments(
                self.counts[k],
                self.ys[k],
                self.yys[k],
                self.means[k] * self.counts[k],
                self.means[k] ** 2 * self.counts[k],
                self.means[k] * self.ys[k],
            )
            for k in chosen
        ]
        total = parts[0]
        for part in parts[1:]:
            total = total + part
        return total


def _new_verdicts(base: _Side, cand: _Side, question: Question, adjust: bool) -> tuple:
    """(pass, fail) per run on every session so far, as the live judge decides."""
    config = CONFIG
    runs = base.ys.shape[1]
    if min(base.counts.sum(), cand.counts.sum()) < config.min_samples:
        return np.zeros(runs, bool), np.zeros(runs, bool)
    precision = mixture_precision(config.resolution, config.confidence, config.power)
    found = estimate(base.moments(), cand.moments(), adjust=adjust)
    half = mixture_half_width(found.information, precision, config.confidence)
    good = passes(question, found.delta, found.delta - half, config.tolerance)
    bad = fails(question, found.delta + half, config.tolerance)
    judged = [
        k
        for k in range(len(base.counts))
        if min(base.counts[k], cand.counts[k]) >= config.min_tenant_samples
    ]
    confidence = bonferroni(config.confidence, len(judged))
    tenant_precision = mixture_precision(config.resolution, confidence, config.power)
    for k in judged:
        one = estimate(base.moments(k), cand.moments(k))
        high = one.delta + mixture_half_width(one.information, tenant_precision, confidence)
        bad = bad | fails(Question.NO_HARM, high, config.tolerance)
    return good & ~bad, bad


def _old_verdicts(base: np.ndarray, cand: np.ndarray, tenants: np.ndarray) -> tuple:
    """(pass, fail) per run on one look's sessions, as the judge before this one decided."""
    config = CONFIG
    alpha = 1.0 - config.confidence

    def judged(b: np.ndarray, c: np.ndarray, level: float) -> tuple:
        drop = b.mean(1) - c.mean(1)
        p = mann_whitney_p(c, b)
        return drop <= config.tolerance, (drop > config.tolerance) & (p < level)

    good, bad = judged(base, cand, alpha)
    present = [k for k in np.unique(tenants) if (tenants == k).sum() >= config.min_tenant_samples]
    for k in present:
        mask = tenants == k
        bad = bad | judged(base[:, mask], cand[:, mask], alpha / len(present))[1]
    return good & ~bad, bad


def mann_whitney_p(candidate: np.ndarray, baseline: np.ndarray) -> np.ndarray:
    """Two-sided Mann-Whitney p per row, as `evolution.stats.mann_whitney` (scipy's normal
    approximation with tie and continuity corrections), for thousands of rows at once."""
    from scipy.special import ndtr

    rows, m = candidate.shape
    n = baseline.shape[1]
    total = m + n
    data = np.concatenate([candidate, baseline], axis=1)
    span = data.max() - data.min() + 1.0
    shifted = data + np.arange(rows)[:, None] * span  # one sort ranks every row apart
    ordered = np.sort(shifted, axis=None)
    left = np.searchsorted(ordered, shifted, "left")
    right = np.searchsorted(ordered, shifted, "right")
    ranks = (left + right + 1) / 2.0 - np.arange(rows)[:, None] * total
    ties = ((right - left).astype(float) ** 2 - 1.0).sum(1)  # sum over tie groups of t^3 - t
    u = ranks[:, :m].sum(1) - m * (m + 1) / 2.0
    sigma = np.sqrt(m * n / 12.0 * ((total + 1) - ties / (total * (total - 1))))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (np.abs(u - m * n / 2.0) - 0.5) / sigma
    return np.where(sigma > 0, np.clip(2.0 * ndtr(-z), 0.0, 1.0), 1.0)


def simulate(
    world: World,
    effect: float,
    per_look: int,
    steps: int,
    max_extensions: int,
    judge: str,
    runs: int,
    seed: int,
) -> Outcome:
    """Walk `runs` canaries through the workflow's loop with `judge` ("old", "new", "cuped")."""
    rng = np.random.default_rng(seed)
    tenants = world.tenants(per_look)
    question = Question.SUPERIORITY if effect > 0 else Question.NON_INFERIORITY
    base, cand = _Side(world, runs), _Side(world, runs)
    step = np.zeros(runs, int)
    extension = np.zeros(runs, int)
    active = np.ones(runs, bool)
    promoted = np.zeros(runs, bool)
    early = np.zeros(runs, bool)
    stopped_first = np.zeros(runs, bool)
    for t in range(steps * (max_extensions + 1)):
        base_values = world.draw(rng, 0.0, runs, per_look)
        cand_values = world.draw(rng, effect, runs, per_look)
        if judge == "old":
            good, bad = _old_verdicts(base_values, cand_values, tenants)
        else:
            base.add(base_values, tenants)
            cand.add(cand_values, tenants)
            good, bad = _new_verdicts(base, cand, question, judge == "cuped")
        if t < 2:
            early |= good & active & (step == 0)
        if t == 0:
            stopped_first = bad.copy()
        marginal = active & ~good & ~bad
        extension = np.where(marginal, extension + 1, np.where(active & good, 0, extension))
        step = np.where(active & good, step + 1, step)
        promoted |= active & (step == steps)
        active &= ~bad & (step < steps) & (extension <= max_extensions)
    return Outcome(float(promoted.mean()), float(early.mean()), float(stopped_first.mean()))


def planned(world: World, resolution: float | None = None) -> tuple[int, int]:
    """Sessions a side the new judge plans to tell a change of `resolution` (the gate's own:
    non-inferiority at the tolerance), without and with CUPED."""
    config = CONFIG
    # The gate's test is tuned to its own resolution whatever the change it meets.
    precision = mixture_precision(config.resolution, config.confidence, config.power)
    rng = np.random.default_rng(2)
    n = 20_000
    values = world.draw(rng, 0.0, 2, n)
    tenants = world.tenants(n)
    x = np.array(world.means)[tenants]
    found = {}
    for adjust in (False, True):
        sides = [Moments.of(values[i], x) for i in (0, 1)]
        one = estimate(*sides, adjust=adjust)
        found[adjust] = sessions_needed(
            float(one.variance_baseline),
            float(one.variance_candidate),
            resolution or config.resolution,
            config.confidence,
            config.power,
            precision,
        )
    return found[False], found[True]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--write", action="store_true", help="append the tables to RESULTS.md")
    args = parser.parse_args()
    started = time.monotonic()
    lines = [
        f"## Gate promotion rates ({datetime.now(UTC):%Y-%m-%d}, {platform.machine()}, "
        f"{_cores()} cores)",
        "",
        f"`.venv/bin/python -m benchmarks.gates --runs {args.runs}`: the share of simulated "
        f"canaries promoted, old judge -> new judge (-> new with CUPED where a tenant "
        f"covariate exists), tolerance {CONFIG.tolerance:g}, confidence "
        f"{CONFIG.confidence:g}, power {CONFIG.power:g}. Drops and the neutral change ask "
        "non-inferiority, the +0.2 fix superiority; `early` is the share of new-judge canaries "
        "whose first step passed within two looks. Rows of long canaries simulate fewer of "
        "them (at least 200; the old judge half as many).",
        "",
    ]
    checks = []
    for world in WORLDS:
        plain, cuped = planned(world)
        gain, _ = planned(world, FIX)
        lines += [
            f"### {world.name} (planned: ~{plain} sessions a side"
            + (f", ~{cuped} with CUPED" if world.name == "tenant-imbalanced" else "")
            + f"; ~{gain} to tell the +{FIX:g} fix)",
            "",
            "| looks | per look | " + " | ".join(f"{e:+.2f}" for e in EFFECTS) + " | +0.20 early |",
            "|---|---|" + "---|" * (len(EFFECTS) + 1),
        ]
        judges = ("old", "new", "cuped") if world.name == "tenant-imbalanced" else ("old", "new")
        sizes = (*PER_LOOK, math.ceil(plain / 3))
        for steps, extensions in LOOKS:
            for per_look in sizes:
                cells, early = [], 0.0
                for effect in EFFECTS:
                    rates = []
                    for judge in judges:
                        runs = _runs(args.runs, per_look * steps * (extensions + 1), judge)
                        out = simulate(world, effect, per_look, steps, extensions, judge, runs, 7)
                        rates.append(out.promoted)
                        if judge == "new":
                            checks.append((world.name, steps, per_look, plain, effect, out, gain))
                            if effect > 0:
                                early = out.early
                    cells.append(" -> ".join(f"{r:.0%}" for r in rates))
                label = f"{steps * (extensions + 1)} ({steps} x {extensions + 1})"
                size = f"{per_look}" + (" (planned / 3)" if per_look not in PER_LOOK else "")
                lines.append(f"| {label} | {size} | " + " | ".join(cells) + f" | {early:.0%} |")
        lines.append("")
    lines += _acceptance(checks, planned(WORLDS[-1]))
    lines.append(f"\n({time.monotonic() - started:.0f} s)\n")
    text = "\n".join(lines)
    print(text)
    if args.write:
        with RESULTS.open("a") as out:
            out.write("\n" + text)


def _acceptance(checks: list, cuped: tuple[int, int]) -> list[str]:
    worst = max(out.promoted for _, _, _, _, effect, out, _ in checks if effect == -0.10)
    neutral = [
        out.promoted
        for _, _, per_look, plan, effect, out, _ in checks
        if effect == 0.0 and per_look * 3 >= plan  # the first step's three looks reach it
    ]
    fixes = [out.early for *_, effect, out, _ in checks if effect > 0]
    # Rows whose first two looks hold the sessions a side that telling the fix needs.
    told = [
        out.early
        for _, _, per_look, _, effect, out, gain in checks
        if effect > 0 and 2 * per_look >= gain
    ]
    harmful = [out.stopped_first for *_, effect, out, _ in checks if effect == -0.20]
    return [
        "Acceptance (new judge):",
        "",
        f"- -0.10 at tolerance 0.05, worst promotion rate over every row: {worst:.1%} (<= 5%)",
        f"- neutral, non-inferiority, once the planned size is reached within the step: "
        f"{min(neutral):.0%} lowest (>= 80%)",
        f"- +0.2 fix answered within two looks: {np.mean(fixes):.0%} of all canaries (rows "
        f"weighed alike), {np.median(fixes):.0%} in the median row, {min(fixes):.0%} in the "
        f"worst; where two looks hold the sessions the fix needs: {min(told):.0%} lowest",
        f"- -0.20 stopped (failed) at the first look: {np.median(harmful):.0%} of canaries in "
        f"the median row, {min(harmful):.0%} in the worst, {max(harmful):.0%} in the best",
        f"- CUPED on the tenant-imbalanced rewards (each tenant's success before as the "
        f"covariate): ~{cuped[0]} -> ~{cuped[1]} sessions a side planned",
    ]


def _runs(wanted: int, sessions: int, judge: str) -> int:
    """Fewer canaries where each is long (the planned rows), and half as many for the old
    judge (its rank test sorts every look's sessions), so the default run stays short."""
    runs = min(wanted, max(200, 2_000_000 // sessions))
    return runs // 2 if judge == "old" else runs


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


if __name__ == "__main__":
    main()
