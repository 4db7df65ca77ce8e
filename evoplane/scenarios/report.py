"""The scenario suite's result table: in the terminal, and as Markdown for RESULTS.md."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from evoplane.scenarios.runner import ScenarioResult

__all__ = ["markdown", "table"]

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
    def shown(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    return f"{shown(before)} -> {shown(after)}" if after is not None else shown(before)


def table(results: Sequence[ScenarioResult], title: str) -> Group:
    """The result table, one row per evolution, then why each failed scenario failed."""
    shown = Table(*_COLUMNS, title=title, show_lines=False)
    for row in _rows(results):
        shown.add_row(*row, style="red" if row[-1] == "FAIL" else None)
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
