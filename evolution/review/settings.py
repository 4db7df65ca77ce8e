"""Who reviews an agent's queue, and whether the queue is mirrored into MLflow."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ReviewSettings"]


class ReviewSettings(BaseModel):
    """Args:
    reviewers: the people new items are given to, in turn (each to whoever has the fewest
        open); none leaves items unassigned, for anyone to take.
    mirror: mirror the queue into MLflow's review queues (a trace per item in the agent's
        experiment, in its assignee's queue), and take labels given there.
    corrections: queue the corrections the analysis could not read.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    reviewers: list[str] = Field(default_factory=list)
    mirror: bool = True
    corrections: bool = True
