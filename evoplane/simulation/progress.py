"""What a run tells the CLI while it plays (progress bars, stages, finished results)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["QuietReporter", "Reporter"]


class Reporter(Protocol):
    """What the CLI shows while a run plays (`evoplane.cli.progress`); tests pass a quiet one.

    `row` is given each finished result: a demo's evolution, a scenario's result.
    """

    def phase(self, text: str, total: int | None = None) -> None: ...

    def advance(self, count: int = 1) -> None: ...

    def stage(self, text: str) -> None: ...

    def row(self, row: Any) -> None: ...


class QuietReporter:
    def phase(self, text: str, total: int | None = None) -> None:
        pass

    def advance(self, count: int = 1) -> None:
        pass

    def stage(self, text: str) -> None:
        pass

    def row(self, row: Any) -> None:
        pass
