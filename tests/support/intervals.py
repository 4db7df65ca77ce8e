"""How many intervals overlap at most: activity slots in use, from recorded start and end
times (the worker test, and `benchmarks/control_plane.py`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["most_at_once"]


def most_at_once(spans: Iterable[tuple[Any, Any]]) -> int:
    """The most spans open at one instant (an end before a start at the same time)."""
    spans = list(spans)
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak
