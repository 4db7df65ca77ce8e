"""The progress display of long CLI runs (the demo, the scenario suite): a bar per phase of
traffic, a line per stage, and a table per finished round."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

__all__ = ["PhaseProgress"]


class PhaseProgress:
    """A runner's reporter. `render(row)` turns a finished round into what is printed."""

    def __init__(self, console: Console, render: Callable[[Any], RenderableType]) -> None:
        self.render = render
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=False,
        )
        self.task = None

    def __enter__(self) -> PhaseProgress:
        self.progress.start()
        return self

    def __exit__(self, *_) -> None:
        self.progress.stop()

    def phase(self, text: str, total: int | None = None) -> None:
        if self.task is not None:
            self.progress.remove_task(self.task)
        self.task = self.progress.add_task(text, total=total)

    def advance(self, count: int = 1) -> None:
        if self.task is not None:
            self.progress.advance(self.task, count)

    def stage(self, text: str) -> None:
        self.progress.console.print(f"  [dim]{text}[/dim]", highlight=False)
        self.phase(text)  # live gates: the traffic played while they watch

    def row(self, row: Any) -> None:
        # Uncropped: a rendering may hold lines (links) that must stay whole past the width.
        self.progress.console.print(self.render(row), crop=False)
