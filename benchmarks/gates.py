"""How often a whole canary promotes, and how many sessions a harmful one serves first.

Simulated canaries (thousands at once, as numpy arrays) of an agent with binary rewards
walk the workflow's canary: `T` new sessions every 30-minute look, each placed on the
candidate with the step's weight (the router's hash), three tenants. Every look judges all
of the canary's sessions so far through the live judge's own functions
(`evolution.gates.estimate`, `sequential`, `live.passes` / `fails` / `holds`) and moves as
the workflow does:

    new  `evolution.gates.canary.canary_move` with the default `GateConfig`: steps 5 -> 25
         -> 50% advance at their first look with `min_samples` a side and no harm; the
         last step looks until answered, harmed, or the 12-hour budget (24 looks) is spent,
         and an open question then asks a person (counted here as not promoted); a tenant
         not yet shown within `tenant_tolerance` (0.10) holds a pass (`live.holds`);
    old  the canary before it (4dd53fe): a step advanced only on a pass, each step looked
         at most three times (`max_extensions` 2), and a step still open rolled back; no
         tenant held a pass.

Rewards are binary, so each side's sums are its counts and successes; the judge adjusts by
each tenant's success before (CUPED), as the workflow's samples carry it.

`exposure` is the candidate sessions a harmful change served before the canary stopped
(harm, or the end of its budget): the mean and, after the slash, the 95th percentile.

    .venv/bin/python -m benchmarks.gates [--runs 2000] [--write]
"""

from __future__ import annotations

import argparse
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from evolution.gates import GateConfig, Question, Verdict
from evolution.gates.canary import Move, canary_move
from evolution.gates.estimate import Moments, estimate
from evolution.gates.live import bonferroni, fails, holds, passes
from evolution.gates.sequential import mixture_half_width, mixture_precision

CONFIG = GateConfig()
RESULTS = Path(__file__).with_name("RESULTS.md")
PER_LOOK = (200, 600)  # new sessions every 30-minute look (400 and 1200 an hour)
SUP, NI = Question.SUPERIORITY, Question.NON_INFERIORITY
_MOVE = np.vectorize(
    lambda verdict, checked, last, spent: (
        canary_move(
            Verdict(verdict), checked=bool(checked), last_step=bool(last), spent=bool(spent)
        ).value
    ),
    otypes=[object],
)


@dataclass(frozen=True)
class World:
    """Who the sessions come from: each tenant's share and success before the change."""

    name: str
    shares: tuple[float, ...]
    means: tuple[float, ...]


EVEN = World("three even tenants at 0.8", (1 / 3, 1 / 3, 1 / 3), (0.8, 0.8, 0.8))
UNEVEN = World("tenants 60/30/10% at 0.75/0.5/0.3", (0.6, 0.3, 0.1), (0.75, 0.5, 0.3))


@dataclass(frozen=True)
class Row:
    """A change (its effect on each tenant) and the question its canary asks."""

    label: str
    effects: tuple[float, ...]
    question: Question
    world: World = EVEN

    @property
    def harmful(self) -> bool:
        """Worse than the question allows, overall or for a tenant beyond tolerance."""
        overall = float(np.dot(self.world.shares, self.effects))
        allowed = 0.0 if self.question is SUP else -CONFIG.tolerance
        return overall <= allowed or min(self.effects) < -CONFIG.tolerance


ROWS = (
    Row("0 (a person's cost cut)", (0.0,) * 3, NI),
    Row("+0.10", (0.10,) * 3, NI),
    Row("+0.10 (a real fix)", (0.10,) * 3, SUP),
    Row("+0.20", (0.20,) * 3, NI),
    Row("+0.20", (0.20,) * 3, SUP),
    Row("-0.05 (at the margin)", (-0.05,) * 3, NI),
    Row("-0.05", (-0.05,) * 3, SUP),
    Row("-0.10", (-0.10,) * 3, NI),
    Row("-0.10", (-0.10,) * 3, SUP),
    Row("-0.20", (-0.20,) * 3, NI),
    Row("-0.20", (-0.20,) * 3, SUP),
    Row("one tenant -0.20, two +0.10", (0.10, 0.10, -0.20), NI),
    Row("one tenant -0.20, two +0.10", (0.10, 0.10, -0.20), SUP),
    Row("one tenant -0.10, two +0.10", (0.10, 0.10, -0.10), NI),
    Row("one tenant -0.10, two +0.10", (0.10, 0.10, -0.10), SUP),
    Row("0, tenants 60/30/10%", (0.0,) * 3, NI, UNEVEN),
    Row("+0.10, tenants 60/30/10%", (0.10,) * 3, SUP, UNEVEN),
    Row("-0.10, tenants 60/30/10%", (-0.10,) * 3, NI, UNEVEN),
    Row("-0.10 for the 10% tenant", (0.0, 0.0, -0.10), NI, UNEVEN),
)


@dataclass(frozen=True)
class Outcome:
    promoted: float  # share of canaries promoted
    stopped: float  # share stopped by evident harm
    open: float  # share whose question was still open at the end (new: asks a person)
    exposure: float  # candidate sessions served before the canary ended, mean
    exposure_p95: float
    stop_look: float  # median look at which a stopped canary stopped (nan: none stopped)


class _Sides:
    """Each side's running counts and successes per tenant: what every look judges."""

    def __init__(self, world: World, runs: int) -> None:
        shape = (runs, len(world.shares))
        self.means = np.array(world.means)
        self.n = {side: np.zeros(shape) for side in ("base", "cand")}
        self.y = {side: np.zeros(shape) for side in ("base", "cand")}

    def add(self, rng, world: World, row: Row, per_look: int, weight, active) -> np.ndarray:
        """One look's sessions of the still-active canaries; returns the candidate's."""
        sessions = np.round(per_look * np.array(world.shares)).astype(int)
        cand = rng.binomial(sessions[None, :], weight[:, None])
        base = sessions[None, :] - cand
        effects = np.array(row.effects)
        for side, n, p in (("cand", cand, self.means + effects), ("base", base, self.means)):
            hits = rng.binomial(n, np.clip(p, 0.0, 1.0)[None, :])
            self.n[side] += np.where(active[:, None], n, 0)
            self.y[side] += np.where(active[:, None], hits, 0)
        return np.where(active, cand.sum(1), 0)

    def moments(self, side: str, tenant: int | None = None) -> Moments:
        """Binary rewards' sums (y = y^2), each tenant's success before as its covariate."""
        chosen = slice(None) if tenant is None else slice(tenant, tenant + 1)
        n, y, x = self.n[side][:, chosen], self.y[side][:, chosen], self.means[chosen]
        hits = y.sum(1)
        return Moments(n.sum(1), hits, hits, (x * n).sum(1), (x * x * n).sum(1), (x * y).sum(1))


def judge(sides: _Sides, question: Question, *, hold: bool) -> tuple[np.ndarray, np.ndarray]:
    """(verdict, checked) per canary, as `evolution.gates.judge` decides on the reward:
    the question over all tenants, each judged tenant's harm (and, with `hold`, a tenant
    that may be hurt holds a pass, `live.holds`)."""
    config = CONFIG
    runs = sides.n["base"].shape[0]
    checked = np.minimum(sides.n["base"].sum(1), sides.n["cand"].sum(1)) >= config.min_samples
    precision = mixture_precision(config.resolution, config.confidence, config.power)
    with np.errstate(divide="ignore", invalid="ignore"):
        found = estimate(sides.moments("base"), sides.moments("cand"), adjust=True)
        half = mixture_half_width(found.information, precision, config.confidence)
        good = checked & passes(question, found.delta, found.delta - half, config.tolerance)
        bad = checked & fails(question, found.delta + half, config.tolerance)
        judged = np.minimum(sides.n["base"], sides.n["cand"]) >= config.min_tenant_samples
        counts = judged.sum(1)  # the per-tenant level is Bonferroni-corrected over these
        held = np.zeros(runs, bool)
        for k in range(judged.shape[1]):
            one = estimate(sides.moments("base", k), sides.moments("cand", k))
            for count in np.unique(counts[judged[:, k]]):
                at = judged[:, k] & (counts == count)
                level = bonferroni(config.confidence, int(count))
                tenant_precision = mixture_precision(config.resolution, level, config.power)
                half = mixture_half_width(one.information, tenant_precision, level)
                bad |= at & fails(Question.NO_HARM, one.delta + half, config.tolerance)
                if hold:
                    held |= at & holds(one.delta - half, config.tenant_tolerance)
    verdict = np.where(bad, "fail", np.where(good & ~held, "pass", "marginal"))
    return verdict.astype(object), checked


def simulate(row: Row, per_look: int, design: str, runs: int, seed: int) -> Outcome:
    """Walk `runs` canaries of `row` through the `design` ("new" or "old") canary."""
    rng = np.random.default_rng(seed)
    steps = np.array(CONFIG.step_weights)
    last = len(steps) - 1
    budget = round(CONFIG.budget_seconds / CONFIG.step_seconds)
    looks = budget if design == "new" else len(steps) * (CONFIG.max_extensions + 1)
    sides = _Sides(row.world, runs)
    step = np.zeros(runs, int)
    on_step = np.zeros(runs, int)  # looks at the current step (old design)
    active = np.ones(runs, bool)
    ended = {move: np.zeros(runs, bool) for move in ("promote", "stop", "open")}
    exposure = np.zeros(runs)
    stop_look = np.full(runs, np.nan)
    for look in range(1, looks + 1):
        exposure += sides.add(rng, row.world, row, per_look, steps[step], active)
        verdict, checked = judge(sides, row.question, hold=design == "new")
        on_step += 1
        if design == "new":
            moves = _MOVE(verdict, checked, step == last, look >= budget)
        else:
            moves = _old_moves(verdict, step == last, on_step > CONFIG.max_extensions)
        for move, name in ((Move.PROMOTE, "promote"), (Move.STOP, "stop")):
            ended[name] |= active & (moves == move.value)
        ended["open"] |= active & (moves == Move.INCONCLUSIVE.value)
        stop_look = np.where(active & (moves == Move.STOP.value), look, stop_look)
        advance = active & (moves == Move.ADVANCE.value)
        step, on_step = np.where(advance, step + 1, step), np.where(advance, 0, on_step)
        active &= np.isin(moves, [Move.ADVANCE.value, Move.LOOK_AGAIN.value])
    ended["open"] |= active
    stopped = stop_look[np.isfinite(stop_look)]
    return Outcome(
        promoted=float(ended["promote"].mean()),
        stopped=float(ended["stop"].mean()),
        open=float(ended["open"].mean()),
        exposure=float(exposure.mean()),
        exposure_p95=float(np.percentile(exposure, 95)),
        stop_look=float(np.median(stopped)) if stopped.size else float("nan"),
    )


def _old_moves(verdict: np.ndarray, last: np.ndarray, exhausted: np.ndarray) -> np.ndarray:
    """The canary before the ramp: a pass advances (promotes at the last step), a fail
    stops, a step still open after its extensions rolls back."""
    return np.select(
        [verdict == "fail", (verdict == "pass") & last, verdict == "pass", exhausted],
        [Move.STOP.value, Move.PROMOTE.value, Move.ADVANCE.value, Move.INCONCLUSIVE.value],
        Move.LOOK_AGAIN.value,
    ).astype(object)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--write", action="store_true", help="append the tables to RESULTS.md")
    args = parser.parse_args()
    started = time.monotonic()
    results = {
        (row, per_look, design): simulate(row, per_look, design, args.runs, seed=index)
        for index, row in enumerate(ROWS)
        for per_look in PER_LOOK
        for design in ("old", "new")
    }
    lines = _table(results, args.runs) + _acceptance(results, args.runs)
    lines.append(f"\n({time.monotonic() - started:.0f} s)\n")
    text = "\n".join(lines)
    print(text)
    if args.write:
        with RESULTS.open("a") as out:
            out.write("\n" + text)


def _table(results: dict, runs: int) -> list[str]:
    budget = CONFIG.budget_seconds / CONFIG.step_seconds
    header = " | ".join(f"T = {t}: promoted | stopped by harm | exposure" for t in PER_LOOK)
    lines = [
        f"## Gates that can say yes: the canary ramp ({datetime.now(UTC):%Y-%m-%d}, "
        f"{platform.machine()}, {_cores()} cores)",
        "",
        f"`.venv/bin/python -m benchmarks.gates --runs {runs}`: {runs} simulated canaries a "
        f"cell, binary rewards, T new sessions a look, default `GateConfig` (tolerance "
        f"{CONFIG.tolerance:g}, confidence {CONFIG.confidence:g}, steps "
        f"{CONFIG.step_weights}, a look every {CONFIG.step_seconds / 60:.0f} min, budget "
        f"{budget:.0f} looks). Each cell: old (the canary at 4dd53fe) -> new (the ramp). A "
        "new canary neither promoted nor stopped asks a person at the end of its budget; an "
        "old one rolled back. Exposure (harmful changes only): candidate sessions served "
        "until stopped or the end of the budget, mean / 95th percentile.",
        "",
        f"| change | question | {header} |",
        "|---|---|" + "---|---|---|" * len(PER_LOOK),
    ]
    for row in ROWS:
        cells = []
        for per_look in PER_LOOK:
            old, new = results[(row, per_look, "old")], results[(row, per_look, "new")]
            cells += [
                f"{old.promoted:.1%} -> **{new.promoted:.1%}**",
                f"{old.stopped:.0%} -> {new.stopped:.0%}",
                f"{old.exposure:.0f}/{old.exposure_p95:.0f} -> {new.exposure:.0f}/"
                f"{new.exposure_p95:.0f}"
                if row.harmful
                else "",
            ]
        asked = row.question.value.replace("_", "-")
        lines.append(f"| {row.label} | {asked} | " + " | ".join(cells) + " |")
    return lines


def _acceptance(results: dict, runs: int) -> list[str]:
    def new(label: str, question: Question, per_look: int = 200) -> Outcome:
        row = next(r for r in ROWS if r.label == label and r.question is question)
        return results[(row, per_look, "new")]

    NEUTRAL = "0 (a person's cost cut)"  # noqa: N806
    uniform = [r for r in ROWS if r.harmful and len(set(r.effects)) == 1]
    tenant_rows = [r for r in ROWS if len(set(r.effects)) > 1 and min(r.effects) <= -0.10]
    worst = max(results[(r, t, "new")].promoted for r in uniform for t in PER_LOOK)
    worst_tenant = max(results[(r, t, "new")].promoted for r in tenant_rows for t in PER_LOOK)
    minus20 = {
        (question, design): results[(row, 200, design)]
        for row in ROWS
        if row.label == "-0.20" and row.world is EVEN
        for question in (row.question,)
        for design in ("old", "new")
    }
    return [
        "",
        f"Acceptance at T = 200 a look, new design ({runs} canaries a cell):",
        "",
        f"- +0.10 fix, superiority: {new('+0.10 (a real fix)', SUP).promoted:.1%} promoted "
        "(>= 80%)",
        f"- neutral, non-inferiority: {new(NEUTRAL, NI).promoted:.1%} promoted (>= 60%)",
        f"- -0.10, non-inferiority / superiority: {new('-0.10', NI).promoted:.1%} / "
        f"{new('-0.10', SUP).promoted:.1%} promoted (<= 5%)",
        f"- -0.05, superiority: {new('-0.05', SUP).promoted:.1%} promoted (<= 5%)",
        f"- every change worse than its question allows, for every tenant alike, at T = 200 "
        f"and 600: at most {worst:.2%} promoted",
        f"- a tenant harmed (-0.10 or -0.20) while the others gain or hold, either question, "
        f"T = 200 and 600: at most {worst_tenant:.2%} promoted",
        "- -0.20 stopped by harm, non-inferiority / superiority: old "
        + " / ".join(f"{minus20[(q, 'old')].stopped:.0%}" for q in (NI, SUP))
        + " (median look "
        + " / ".join(f"{minus20[(q, 'old')].stop_look:.0f}" for q in (NI, SUP))
        + "), new "
        + " / ".join(f"{minus20[(q, 'new')].stopped:.0%}" for q in (NI, SUP))
        + " (median look "
        + " / ".join(f"{minus20[(q, 'new')].stop_look:.0f}" for q in (NI, SUP))
        + ")",
    ]


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


if __name__ == "__main__":
    main()
