"""How much evidence the tool-schema operator wants before it constrains a parameter."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ToolSchemaConfig"]


class ToolSchemaConfig(BaseModel):
    """How much evidence the operator wants before it constrains a parameter.

    Args:
        min_successes: successful calls needed to learn a rule from.
        max_enum: the largest set of values that may become an enum.
        enum_repeats: successful calls per distinct value before a set counts as closed
            (ids seen once each are an open set, however few).
        max_examples: successful values shown to the model as `examples`.
        rename: propose a clearer model-facing name for an ambiguous parameter.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_successes: int = Field(3, ge=1)
    max_enum: int = Field(8, ge=1)
    enum_repeats: float = Field(2.0, ge=1.0)
    max_examples: int = Field(3, ge=1)
    rename: bool = True
