"""A canary's bookkeeping in the evolution workflow: where its budget ends, the pace of its
last share, and what an open question shows the person it asks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from activities.models import OpenQuestion
    from evolution.gates import GateConfig, GateResult

__all__ = ["Ramp", "duration", "step_words"]


@dataclass
class Ramp:
    """Where a canary's budget ends (seconds since it began) and the pace of its last share."""

    budget: float
    last_began: datetime
    sessions_then: int = 0

    def advanced(self, now: datetime, result: GateResult) -> None:
        self.last_began, self.sessions_then = now, result.sessions or 0

    def pace(self, result: GateResult, now: datetime) -> float | None:
        """Sessions a side an hour since the current share began; None before any came."""
        hours = (now - self.last_began).total_seconds() / 3600.0
        gained = (result.sessions or 0) - self.sessions_then
        return gained / hours if hours > 0 and gained > 0 else None

    def next_wait(
        self, result: GateResult, gate: GateConfig, now: datetime, elapsed: float, last: bool
    ) -> float:
        """A step between looks, or less: at the last share, as long as the sessions that
        would answer the question take (a quarter step at least); never past the budget."""
        wait = gate.step_seconds
        more, pace = _sessions_more(result), self.pace(result, now)
        if last and more is not None and pace:
            wait = min(wait, max(more / pace * 3600.0, gate.step_seconds / 4))
        left = self.budget - elapsed
        return min(wait, left) if left > 1e-6 else wait

    def open_question(self, result: GateResult, now: datetime) -> OpenQuestion:
        """What the person asked is shown: the question, the interval, and what answering
        it would take at the pace of the last share."""
        more, pace = _sessions_more(result), self.pace(result, now)
        hours = more / pace if more is not None and pace else None
        if more is None:
            needs = "at what it shows so far, more sessions would not answer it"
        elif hours is None:
            needs = f"needs about {more} more sessions a side (no pace to go by yet)"
        else:
            needs = (
                f"needs about {more} more sessions a side, about {duration(hours * 3600.0)} "
                f"at today's traffic ({pace:.0f} sessions a side an hour)"
            )
        return OpenQuestion(
            question=result.question,
            sessions=result.sessions or 0,
            sessions_more=more,
            hours_more=hours,
            words=f"{_interval_words(result)}{needs}",
        )


def _sessions_more(result: GateResult) -> int | None:
    """Sessions a side more that would answer the question if the change is what it looks
    like so far; None where more would not answer it."""
    if result.sessions_to_answer is None:
        return None
    return max(result.sessions_to_answer - (result.sessions or 0), 0)


def _interval_words(result: GateResult) -> str:
    """'superiority, +0.04 (95% interval over every look -0.02 to +0.1): ' or ''."""
    asked = [j for j in result.metrics if j.question is result.question and j.delta is not None]
    if result.question is None or not asked:
        return ""
    primary = asked[0]
    return (
        f"{result.question.value.replace('_', '-')}, {primary.delta:+.3g} "
        f"({primary.confidence:.0%} interval over every look {primary.delta_low:+.3g} to "
        f"{primary.delta_high:+.3g}): "
    )


def step_words(step: int, steps: list[float]) -> str:
    return f"canary step {step + 1}/{len(steps)}: {steps[step]:.0%} of new sessions"


def duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
