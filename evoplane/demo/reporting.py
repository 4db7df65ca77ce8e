"""What the demo reports: one row per evolution, and the result."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DemoResult", "EvolutionRow"]


@dataclass
class EvolutionRow:
    """One evolution of the demo, as its table prints it."""

    round: str
    drift: str
    expected: str
    evolution_id: str
    action: str | None = None
    forced: bool = False
    reason: str = ""
    signals: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)
    gates: list[dict[str, Any]] = field(default_factory=list)
    outcome: str | None = None
    outcome_reason: str = ""
    stable_before: str | None = None
    stable_after: str | None = None
    candidate: str | None = None
    reward_before: float | None = None
    reward_after: float | None = None
    scenario_before: float | None = None
    scenario_after: float | None = None
    # The corrections of its window a person labelled before it began (None: no one was asked).
    reviewed: int | None = None
    temporal_url: str | None = None
    mlflow_url: str | None = None
    seconds: float = 0.0


@dataclass
class DemoResult:
    rows: list[EvolutionRow]
    agent: str
    seconds: float
    tickets: int
