"""An agent's code scorers: the team's own success checks, run on its captured traffic.

A scorer is a Python function (`entry_point`, "package.module:function", importable by the
control plane's workers) or an HTTP endpoint (`url`); `tenants` and `task_types` say which
trajectories it applies to. Its results become rewards named `reward` (the scorer's name
by default; `task_success` makes it the task's success check) from `source`.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["ScorerSpec"]

_ENTRY_POINT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


class ScorerSpec(BaseModel):
    """One code scorer.

    Args:
        batch_size: trajectories sent at once (an endpoint gets them in one request; a
            function is called once per trajectory).
        timeout_seconds: how long one call may take (a batch, for an endpoint).
        retries: more tries of a failed call within one run (with a growing pause).
        max_per_run: the most trajectories one run scores (the budget; the rest wait).
        budget_seconds: the longest one run spends on this scorer.
        max_attempts: runs a trajectory is tried on before the scorer gives up on it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    entry_point: str | None = None
    url: str | None = None
    reward: str | None = Field(None, min_length=1, max_length=200)
    source: Literal["test", "judge"] = "test"
    confidence: float = Field(1.0, gt=0.0, le=1.0)
    tenants: list[str] | None = None
    task_types: list[str] | None = None
    batch_size: int = Field(20, ge=1, le=500)
    timeout_seconds: float = Field(10.0, gt=0.0, le=600.0)
    retries: int = Field(2, ge=0, le=10)
    max_per_run: int = Field(500, ge=1, le=100_000)
    budget_seconds: float = Field(120.0, gt=0.0, le=3600.0)
    max_attempts: int = Field(3, ge=1, le=20)

    @field_validator("entry_point")
    @classmethod
    def _entry_point(cls, value: str | None) -> str | None:
        if value is not None and not _ENTRY_POINT.match(value):
            raise ValueError(
                f"{value!r} is not an entry point: give 'package.module:function', a function "
                "the workers can import that takes a trajectory and returns a score"
            )
        return value

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL of a scoring endpoint")
        return value

    @model_validator(mode="after")
    def _one_way(self) -> ScorerSpec:
        if (self.entry_point is None) == (self.url is None):
            raise ValueError(
                f"scorer {self.name}: give an entry_point or a url (exactly one of them)"
            )
        return self

    @property
    def reward_name(self) -> str:
        return self.reward or self.name
