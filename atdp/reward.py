"""Late-bound rewards: many per event or trajectory, stored apart, never changing an event."""

from __future__ import annotations

import uuid
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field

from atdp._base import ATDP_VERSION, ATDPModel, Name, Text

__all__ = [
    "BinaryValue",
    "CategoricalValue",
    "Reward",
    "RewardSource",
    "RewardValue",
    "ScalarValue",
]


class RewardSource(StrEnum):
    EXPLICIT = "explicit"  # the user said so: thumbs, scalar, category, correction
    IMPLICIT_NEXT_TURN = "implicit_next_turn"  # inferred from what happened next
    TEST = "test"  # a verifier: unit test, exit code, schema check
    JUDGE = "judge"  # an LLM or model judge
    HUMAN_REVIEW = "human_review"  # a reviewer, after the fact


# Rewards are scores, not measurements: a bound keeps every weighted mean finite.
RewardNumber = Annotated[float, Field(ge=-1e12, le=1e12)]


class ScalarValue(ATDPModel):
    kind: Literal["scalar"] = "scalar"
    value: RewardNumber


class BinaryValue(ATDPModel):
    kind: Literal["binary"] = "binary"
    value: bool


class CategoricalValue(ATDPModel):
    kind: Literal["categorical"] = "categorical"
    value: Name
    score: RewardNumber | None = Field(
        default=None, description="Numeric meaning of the category, if it has one."
    )


RewardValue = Annotated[ScalarValue | BinaryValue | CategoricalValue, Field(discriminator="kind")]


class Reward(ATDPModel):
    """One judgement of an event or a whole trajectory, from one source."""

    atdp_version: Literal["1.0"] = ATDP_VERSION
    id: uuid.UUID
    tenant: Name
    trajectory_id: uuid.UUID
    event_id: uuid.UUID | None = Field(default=None, description="None: the whole trajectory.")
    name: Name = Field(default="reward", description="The metric, e.g. 'task_success', 'safety'.")
    value: RewardValue
    critique: Text | None = Field(default=None, description="Natural-language critique.")
    source: RewardSource
    confidence: Annotated[float, Field(ge=0.0, le=1.0)] = 1.0
    created_at: AwareDatetime

    @property
    def numeric(self) -> float | None:
        """The value as a number: scalars as-is, binary 1/0, categories by their score."""
        match self.value:
            case ScalarValue(value=v):
                return v
            case BinaryValue(value=v):
                return 1.0 if v else 0.0
            case CategoricalValue(score=s):
                return s
        return None  # pragma: no cover - the union is exhaustive
