"""A canary's plan before it starts: the sessions its question needs, and the hours they take.

From the window's traffic (rewarded sessions an hour) and variance, the plan walks the
canary's own ramp (`canary.canary_move`: each step before the last until a look has
`min_samples` a side, then the last step) look by look until the information its
confidence sequence needs to tell `distance` with `power` is there. A plan longer than the
canary's budget cannot be answered at today's traffic: the decision counts that against a
change, and the evolution says so before the canary starts.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

from evolution.gates.records import GateConfig, Question
from evolution.gates.sequential import mixture_precision, sessions_needed

__all__ = ["CanaryPlan", "plan_canary"]

_MAX_LOOKS = 1_000_000  # a plan longer than this many looks is "not at this traffic"


class CanaryPlan(BaseModel):
    """How long a canary needs to answer its question at today's traffic.

    Args:
        question: what the primary metric must show.
        distance: the difference planned for: the gain a fix is expected to bring
            (superiority), or the tolerance a neutral change must be shown within.
        variance: one session's reward variance in the window.
        rate_per_hour: rewarded sessions an hour in the window (today's traffic).
        sessions_needed: sessions a side the question needs at an even split.
        hours: how long the canary's ramp takes to bring them (None: never at this
            traffic).
        budget_hours: the canary's budget (`GateConfig.budget_seconds`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    question: Question
    distance: float = Field(gt=0.0)
    variance: float = Field(ge=0.0)
    rate_per_hour: float = Field(ge=0.0)
    sessions_needed: int = Field(ge=1)
    hours: float | None = Field(default=None, ge=0.0)
    budget_hours: float = Field(gt=0.0)

    @property
    def answerable(self) -> bool:
        """The budget holds the plan's sessions at today's traffic."""
        return self.hours is not None and self.hours <= self.budget_hours

    @property
    def shortfall(self) -> float:
        """The share of the plan the budget cannot cover: 0 when answerable, 1 when never."""
        if self.answerable:
            return 0.0
        return 1.0 if self.hours is None else 1.0 - self.budget_hours / self.hours

    def words(self) -> str:
        """'superiority: ~310 sessions a side to show a +0.12 gain, about 3.5 h at today's
        400 rewarded sessions an hour (budget 12 h)'."""
        shown = (
            f"show a +{self.distance:.2g} gain"
            if self.question is Question.SUPERIORITY
            else f"show a neutral change within {self.distance:.2g}"
        )
        asked = self.question.value.replace("_", "-")
        need = f"{asked}: ~{self.sessions_needed} sessions a side to {shown}"
        budget = _hours_text(self.budget_hours)
        traffic = f"today's {self.rate_per_hour:.0f} rewarded sessions an hour"
        if self.hours is None:
            return f"{need}, which {traffic} never bring: it cannot be answered"
        at = f"about {_hours_text(self.hours)} at {traffic}"
        if self.answerable:
            return f"{need}, {at} (budget {budget})"
        return f"{need}, {at}: more than the canary's {budget} budget"


def plan_canary(
    config: GateConfig,
    question: Question,
    *,
    variance: float,
    rate_per_hour: float,
    distance: float | None = None,
) -> CanaryPlan:
    """The plan of a canary run with `config` at `rate_per_hour` rewarded sessions.

    Args:
        distance: the difference to tell (default: the gate's resolution).
    """
    distance = distance or config.resolution
    precision = mixture_precision(config.resolution, config.confidence, config.power)
    needed = sessions_needed(
        variance, variance, distance, config.confidence, config.power, precision
    )
    looks = _looks(config, variance, rate_per_hour, needed)
    hours = None if looks is None else looks * config.step_seconds / 3600.0
    return CanaryPlan(
        question=question,
        distance=distance,
        variance=variance,
        rate_per_hour=rate_per_hour,
        sessions_needed=needed,
        hours=hours,
        budget_hours=config.budget_seconds / 3600.0,
    )


def _looks(config: GateConfig, variance: float, rate: float, needed: int) -> int | None:
    """The look at which the last step holds the information `needed` sessions a side give
    at an even split; None when traffic never brings it."""
    per_look = rate * config.step_seconds / 3600.0
    if per_look <= 0:
        return None
    if variance <= 0:
        return len(config.step_weights)
    wanted = needed / (2.0 * variance)
    baseline = candidate = 0.0
    look = 0
    for weight in config.step_weights[:-1]:  # each ramp step until a look has min_samples
        while True:
            look += 1
            baseline += per_look * (1.0 - weight)
            candidate += per_look * weight
            if min(baseline, candidate) >= config.min_samples or look > _MAX_LOOKS:
                break
    weight = config.step_weights[-1]

    def enough(more: int) -> bool:
        b = baseline + more * per_look * (1.0 - weight)
        c = candidate + more * per_look * weight
        return b > 0 and c > 0 and 1.0 / (variance / b + variance / c) >= wanted

    if not enough(_MAX_LOOKS):
        return None
    low, high = 0, 1
    while not enough(high):
        low, high = high, high * 2
    while high - low > 1:  # the fewest looks at the last step that hold it
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return look + max(high, 1)


def _hours_text(hours: float) -> str:
    if hours < 1.0:
        return f"{math.ceil(hours * 60):.0f} min"
    return f"{hours:.1f} h" if hours < 10 else f"{hours:.0f} h"
