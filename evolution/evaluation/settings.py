"""How an agent's evaluation set is kept and used."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["EvaluationSettings"]


class EvaluationSettings(BaseModel):
    """Args:
    name: the set reviewed cases and fixed failures go to (and gates read).
    max_cases: the most cases it keeps; the oldest fixed cases go first.
    replay: the replay gate replays the set's cases beside the window's, and asks its
        required safety cases.
    harness: the harness optimiser learns from the set's cases too, with their feedback.
    keep_fixed: a promotion adds the past failures its replay fixed, to stay fixed.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field("default", min_length=1, max_length=64, pattern=r"^[^/@]+$")
    max_cases: int = Field(200, ge=1, le=5000)
    replay: bool = True
    harness: bool = True
    keep_fixed: bool = True
