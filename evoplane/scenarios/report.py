"""The scenario suite's results: a block per scenario as it ends and a summary, both
within 80 columns (in a terminal and in a log), and the full table as Markdown for
RESULTS.md; over repeated runs (`evoplane bench scenarios --runs N`), each scenario's pass
rate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.text import Text

from evoplane.scenarios.runner import ScenarioResult
from evoplane.simulation.report import labelled_block, number, spread, summary_table

__all__ = [
    "ScenarioRate",
    "block",
    "markdown",
    "pass_rates",
    "rates_markdown",
    "rates_table",
    "table",
]

_COLUMNS = ("scenario", "world", "expected", "chosen", "gates", "outcome", "success", "time", "")


def _rows(results: Sequence[ScenarioResult]) -> list[tuple[str, ...]]:
    rows = []
    for result in results:
        mark = "pass" if result.passed else "FAIL"
        for index, record in enumerate(result.evolutions or [None]):
            first = index == 0
            rows.append(
                (
                    result.name if first else "",
                    result.domain if first else "",
                    "/".join(record.expected) if record else "",
                    (record.action or "-") if record else "-",
                    " ".join(record.gates) if record else "",
                    (record.outcome or "-") if record else "-",
                    _success(record.before, record.after) if record else "",
                    f"{result.seconds:.0f}s" if first else "",
                    mark if first else "",
                )
            )
    return rows


def _success(before: float | None, after: float | None) -> str:
    return f"{number(before)} -> {number(after)}" if after is not None else number(before)


def block(result: ScenarioResult) -> RenderableType:
    """One scenario as it ends: a rule with its name, then a labelled line each for its
    world, every evolution (expected and chosen, gates, outcome, success) and its result.
    Words wrap whole, so it reads at 80 columns and in a log."""
    lines: list[tuple[str, str | Text]] = [("world", result.domain)]
    for record in result.evolutions:
        mark = "✓" if record.action in record.expected else "✗"
        lines.append(
            (
                "evolution",
                f"expected {'/'.join(record.expected)}, chose {record.action or '-'} {mark}; "
                f"{record.outcome or '-'}; success {_success(record.before, record.after)}",
            )
        )
        if record.gates:
            lines.append(("gates", " ".join(record.gates)))
    lines.append(("took", f"{result.seconds:.0f} s"))
    verdict = "pass" if result.passed else f"FAIL: {result.why}"
    lines.append(("result", Text(verdict, style=None if result.passed else "red")))
    return labelled_block(result.name, lines)


def table(results: Sequence[ScenarioResult], title: str) -> RenderableType:
    """The suite's summary, one line per evolution within 80 columns (the gates are in each
    scenario's block and the Markdown), then why each failed scenario failed."""
    shown = summary_table(title)
    for name in ("scenario", "chosen", "outcome", "success", "time", ""):
        shown.add_column(name, no_wrap=name != "outcome", overflow="fold")
    for result in results:
        mark = "pass" if result.passed else "FAIL"
        for index, record in enumerate(result.evolutions or [None]):
            first = index == 0
            chosen = "-"
            if record is not None:
                tick = "✓" if record.action in record.expected else "✗"
                chosen = f"{record.action or '-'} {tick}"
            shown.add_row(
                result.name if first else "",
                chosen,
                (record.outcome or "-") if record else "-",
                _success(record.before, record.after) if record else "",
                f"{result.seconds:.0f}s" if first else "",
                mark if first else "",
                style="red" if not result.passed else None,
            )
    failed = [Text(f"{r.name}: {r.why}", style="red") for r in results if not r.passed]
    return Group(shown, *failed)


def markdown(results: Sequence[ScenarioResult]) -> str:
    """The same table in Markdown, then each failure's reason."""
    lines = [
        "| " + " | ".join(_COLUMNS[:-1]) + " | pass |",
        "|" + "---|" * len(_COLUMNS),
    ]
    lines += [
        "| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in _rows(results)
    ]
    failed = [f"- `{r.name}`: {r.why}" for r in results if not r.passed]
    passed = sum(r.passed for r in results)
    summary = f"\n{passed} of {len(results)} scenarios passed."
    return "\n".join([*lines, summary, *failed]) + "\n"


@dataclass
class ScenarioRate:
    """One scenario over repeated runs of the suite."""

    name: str
    runs: int = 0
    passed: int = 0
    # Per run, its weakest fix: the lowest success after any of its evolutions (the
    # figure a fix's bar is held against), where one was measured.
    weakest_after: list[float] = field(default_factory=list)
    failures: list[tuple[int, str]] = field(default_factory=list)  # (seed, why)

    @property
    def after(self) -> str:
        """The weakest fix's median over the runs, and its range."""
        return spread(self.weakest_after, "{:.2f}")


def pass_rates(runs: Sequence[tuple[int, Sequence[ScenarioResult]]]) -> list[ScenarioRate]:
    """Each scenario's record over `runs`, (seed, results) pairs, in the suite's order."""
    rates: dict[str, ScenarioRate] = {}
    for seed, results in runs:
        for result in results:
            rate = rates.setdefault(result.name, ScenarioRate(result.name))
            rate.runs += 1
            rate.passed += result.passed
            afters = [r.after for r in result.evolutions if r.after is not None]
            if afters:
                rate.weakest_after.append(min(afters))
            if not result.passed:
                rate.failures.append((seed, result.why))
    return list(rates.values())


def rates_table(rates: Sequence[ScenarioRate], title: str) -> RenderableType:
    """Each scenario's pass rate and its weakest fix within 80 columns, then every failure
    with its seed."""
    shown = summary_table(title)
    for name in ("scenario", "passed", "weakest fix after: median (range)"):
        shown.add_column(name, no_wrap=True)
    for rate in rates:
        style = "red" if rate.passed < rate.runs else None
        shown.add_row(rate.name, f"{rate.passed} of {rate.runs}", rate.after, style=style)
    failed = [
        Text(f"{rate.name}, seed {seed}: {why}", style="red")
        for rate in rates
        for seed, why in rate.failures
    ]
    return Group(shown, *failed)


def rates_markdown(rates: Sequence[ScenarioRate]) -> str:
    """The same in Markdown, for RESULTS.md."""
    lines = [
        "| scenario | passed | weakest fix after: median (range) |",
        "|---|---|---|",
        *(f"| {r.name} | {r.passed} of {r.runs} | {r.after} |" for r in rates),
    ]
    every = sum(r.passed == r.runs for r in rates)
    lines.append(f"\n{every} of {len(rates)} scenarios passed in every run.")
    lines += [f"- `{r.name}`, seed {seed}: {why}" for r in rates for seed, why in r.failures]
    return "\n".join(lines) + "\n"
