"""How often the demo shows every claim: the demo played N times from one install.

Each run is what `make run` does after its install: a fresh data directory, the embedded
stack started for the run and stopped after it, every round played, the claims read off the
rows. Runs take seeds `seed, seed + 1, ...`, so the rate covers the customers' draws as well
as the timing of a loaded machine, never one lucky seed. Each finished run is appended to a
JSON-lines file as it ends, so a long benchmark loses nothing when stopped and can be read
while it goes on.
"""

from __future__ import annotations

import json
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from evoplane.demo.report import facts
from evoplane.demo.reporting import DemoResult, EvolutionRow
from evoplane.simulation.progress import Reporter
from evoplane.simulation.report import spread

__all__ = ["RoundRun", "Run", "Summary", "markdown", "play_runs", "read_runs", "summarise"]


@dataclass(frozen=True)
class RoundRun:
    """One evolution of one run: what it chose, how it ended, its gain and its time."""

    round: str
    action: str | None
    outcome: str | None
    reward_before: float | None
    reward_after: float | None
    seconds: float

    @property
    def gain(self) -> float | None:
        if self.reward_before is None or self.reward_after is None:
            return None
        return self.reward_after - self.reward_before


@dataclass(frozen=True)
class Run:
    """One play of the demo: its seed, the claims shown and missed, its rounds and time."""

    seed: int
    seconds: float
    claims: dict[str, bool]
    rounds: list[RoundRun] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)  # each missed claim's line
    error: str | None = None  # why the run stopped before its end, if it did

    @property
    def passed(self) -> bool:
        return self.error is None and bool(self.claims) and all(self.claims.values())

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> Run:
        rounds = [RoundRun(**r) for r in data.get("rounds", [])]
        return cls(**{**data, "rounds": rounds})


def run_of(seed: int, result: DemoResult, seconds: float) -> Run:
    """A finished demo as a benchmark run."""
    shown = facts(result.rows)
    return Run(
        seed=seed,
        seconds=round(seconds, 1),
        claims={fact.claim: fact.shown for fact in shown},
        rounds=[_round(row) for row in result.rows],
        missed=[fact.line for fact in shown if not fact.shown],
    )


def _round(row: EvolutionRow) -> RoundRun:
    name = row.round if not row.forced or row.expected in {"replay", "shadow", "canary"} else None
    return RoundRun(
        round=name or f"{row.round} (person's {row.action})",
        action=row.action,
        outcome=row.outcome,
        reward_before=row.reward_before,
        reward_after=row.reward_after,
        seconds=row.seconds,
    )


def play_runs(
    runs: int,
    *,
    seed: int,
    data_root: Path,
    play: Callable[[int, Path, Reporter], DemoResult],
    reporter: Callable[[int], Reporter],
    on_run: Callable[[Run], None],
    keep_data: bool = False,
) -> list[Run]:
    """Play the demo `runs` times, seeds `seed` upwards, each in a fresh directory under
    `data_root`; `play(seed, data_dir, reporter)` runs one whole demo on its own stack.

    A run that raises is kept as a failed run with its error (the benchmark goes on); a
    KeyboardInterrupt stops the benchmark.
    """
    done: list[Run] = []
    for index in range(runs):
        run_seed = seed + index
        data_dir = data_root / f"run-{run_seed}"
        shutil.rmtree(data_dir, ignore_errors=True)
        started = time.monotonic()
        try:
            result = play(run_seed, data_dir, reporter(index))
            run = run_of(run_seed, result, time.monotonic() - started)
        except KeyboardInterrupt:
            raise
        except Exception as error:  # noqa: BLE001 - a crashed run is a result, not an end
            words = "".join(traceback.format_exception_only(error)).strip()
            run = Run(run_seed, round(time.monotonic() - started, 1), {}, error=words)
        done.append(run)
        on_run(run)
        if not keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
    return done


def read_runs(path: Path) -> list[Run]:
    """The runs a JSON-lines file holds (as `play_runs`'s `on_run` appends them)."""
    return [Run.of_json(json.loads(line)) for line in path.read_text().splitlines() if line]


@dataclass(frozen=True)
class ClaimRate:
    claim: str
    shown: int
    runs: int


@dataclass(frozen=True)
class RoundFigures:
    round: str
    runs: int
    gains: list[float]
    seconds: list[float]
    outcomes: dict[str, int]


@dataclass(frozen=True)
class Summary:
    runs: int
    passed: int
    claims: list[ClaimRate]
    rounds: list[RoundFigures]
    seconds: list[float]
    errors: list[str]


def summarise(runs: Sequence[Run]) -> Summary:
    """Each claim's pass rate (a claim a run never reached counts as missed), each round's
    gains, outcomes and times, and the share of runs that showed every claim."""
    claims = list(dict.fromkeys(claim for run in runs for claim in run.claims))
    rates = [
        ClaimRate(claim, sum(run.claims.get(claim, False) for run in runs), len(runs))
        for claim in claims
    ]
    names = list(dict.fromkeys(r.round for run in runs for r in run.rounds))
    rounds = []
    for name in names:
        played = [r for run in runs for r in run.rounds if r.round == name]
        outcomes: dict[str, int] = {}
        for r in played:
            outcomes[r.outcome or "?"] = outcomes.get(r.outcome or "?", 0) + 1
        rounds.append(
            RoundFigures(
                name,
                len(played),
                [r.gain for r in played if r.gain is not None],
                [r.seconds for r in played],
                outcomes,
            )
        )
    return Summary(
        runs=len(runs),
        # Every claim any run made: a run that took another path and never made one missed it.
        passed=sum(run.passed and all(run.claims.get(c) is True for c in claims) for run in runs),
        claims=rates,
        rounds=rounds,
        seconds=[run.seconds for run in runs if run.error is None],
        errors=[f"seed {run.seed}: {run.error}" for run in runs if run.error],
    )


def markdown(summary: Summary, heading: str = "") -> str:
    """The summary as Markdown tables (for benchmarks/RESULTS.md)."""
    lines = [heading, ""] if heading else []
    lines += [
        f"Whole runs with every claim shown: **{summary.passed} of {summary.runs}**; "
        f"a run took {_minutes(summary.seconds)}.",
        "",
        "| claim | shown |",
        "|---|---|",
    ]
    lines += [f"| {c.claim} | {c.shown} of {c.runs} |" for c in summary.claims]
    lines += [
        "",
        "| round | outcomes | reward gain, median (range) | minutes, median (range) |",
        "|---|---|---|---|",
    ]
    for r in summary.rounds:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r.outcomes.items()))
        lines.append(
            f"| {r.round} | {outcomes} | {spread(r.gains, '{:+.3f}')} | "
            f"{spread([s / 60 for s in r.seconds], '{:.1f}')} |"
        )
    if summary.errors:
        lines += ["", "Runs that stopped early:", ""]
        lines += [f"- {error}" for error in summary.errors]
    return "\n".join(lines) + "\n"


def _minutes(seconds: Sequence[float]) -> str:
    if not seconds:
        return "-"
    return spread([s / 60 for s in seconds], "{:.1f}") + " min"
