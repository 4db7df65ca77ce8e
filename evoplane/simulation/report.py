"""The shapes a run's results print in, read well at 80 columns and in a log: a block of
labelled lines whose text wraps at word boundaries, a borderless summary table, and the
figures they hold."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

__all__ = ["LABEL", "labelled_block", "number", "spread", "summary_table"]

LABEL = 9  # the width of a block's labels


def labelled_block(
    title: str, lines: Sequence[tuple[str, str | Text]], *after: RenderableType
) -> RenderableType:
    """A rule with `title`, then a line per (label, text), then `after` as it is (links
    that must stay whole: print the block with `crop=False`)."""
    body = Table.grid(padding=(0, 1))
    body.add_column(width=LABEL, no_wrap=True, style="dim")
    body.add_column(ratio=1, overflow="fold")
    for label, text in lines:
        body.add_row(label, text)
    return Group(Rule(f"[bold]{title}[/bold]", align="left", style="dim"), body, *after)


def summary_table(title: str) -> Table:
    """A titled table with no borders, as narrow as its columns."""
    return Table(title=title, title_justify="left", box=None, padding=(0, 1), expand=False)


def number(value: float | None) -> str:
    """A rate or reward to two places; "-" where there is none."""
    return "-" if value is None else f"{value:.2f}"


def spread(values: Iterable[float], form: str) -> str:
    """A sample over repeated runs: its median and range, each in `form`; "-" if empty."""
    values = sorted(values)
    if not values:
        return "-"
    middle = statistics.median(values)
    return f"{form.format(middle)} ({form.format(values[0])} to {form.format(values[-1])})"
