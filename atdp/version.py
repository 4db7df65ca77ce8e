"""The agent version contract: an immutable bundle the gateway applies to every request.

    AgentVersion = (model_ref, harness, memory_snapshot, tool_schema_overlay, guardrails, skills)

Two specs with the same content have the same `content_hash`, whoever built them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any, Self

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveInt, model_validator

from atdp._base import ATDPModel, JsonObject, Name, Text
from atdp.event import ChatMessage

__all__ = [
    "FewShotDemo",
    "Guardrails",
    "Harness",
    "MemorySnapshot",
    "ModelRef",
    "Skill",
    "SkillCall",
    "SkillSet",
    "ToolOverride",
    "ToolSchemaOverlay",
    "VersionSpec",
]


class ModelRef(ATDPModel):
    """Where requests go: engine and checkpoint or adapter."""

    engine: Name = Field(
        description="Upstream engine: openai | openai-responses | anthropic | local | sglang."
    )
    base_url: Text | None = None
    replicas: list[Text] = Field(
        default_factory=list,
        description="More base URLs serving the same model; a session sticks to one.",
    )
    model: Text | None = Field(default=None, description="Model name sent upstream.")
    checkpoint: Text | None = None
    adapter: Text | None = Field(default=None, description="LoRA adapter name, if any.")
    prompt_price: NonNegativeFloat | None = Field(
        default=None, description="USD per million prompt tokens, for cost accounting."
    )
    completion_price: NonNegativeFloat | None = Field(
        default=None, description="USD per million completion tokens."
    )

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """What a call cost at this route's prices; None when no price is known."""
        if self.prompt_price is None and self.completion_price is None:
            return None
        return (
            prompt_tokens * (self.prompt_price or 0.0)
            + completion_tokens * (self.completion_price or 0.0)
        ) / 1e6


class FewShotDemo(ATDPModel):
    messages: list[ChatMessage]


class Harness(ATDPModel):
    """The DSPy-optimisable part: instructions, template and demos."""

    instructions: Text = ""
    template: Text | None = Field(
        default=None, description="System prompt template; '{instructions}' is substituted."
    )
    demos: list[FewShotDemo] = Field(default_factory=list)


class MemorySnapshot(ATDPModel):
    """The memory items retrievable by this version."""

    item_ids: list[Text] = Field(default_factory=list)
    top_k: PositiveInt = 3


class ToolOverride(ATDPModel):
    """A rewrite of one tool as the model sees it."""

    description: Text | None = None
    parameters: JsonObject | None = Field(default=None, description="Replacement JSON Schema.")
    argument_map: dict[Name, Name] = Field(
        default_factory=dict, description="Model-facing argument name -> the agent's own name."
    )


class ToolSchemaOverlay(ATDPModel):
    tools: dict[Name, ToolOverride] = Field(default_factory=dict)


class SkillCall(ATDPModel):
    """One tool call of a skill's sketch: which tool, with which arguments filled in."""

    tool: Name
    arguments: list[Name] = Field(default_factory=list, description="Argument names it sets.")


class Skill(ATDPModel):
    """A named procedure: retrieved by its description, injected as its steps.

    Args:
        description: what the procedure is for; requests are matched against it.
        steps: the procedure, in order, as the model should follow it.
        tool_calls: an optional sketch of the tool calls the steps make, in order.
        tenants: the tenants it serves; empty for every tenant of the agent.
        task_types: the task types it serves (`metadata.task_type`); empty for any.
        provenance: where it was learned (trajectory, event or correction ids).
    """

    name: Name
    description: Text
    steps: list[Text] = Field(min_length=1)
    tool_calls: list[SkillCall] = Field(default_factory=list)
    tenants: list[Name] = Field(default_factory=list)
    task_types: list[Name] = Field(default_factory=list)
    provenance: list[Text] = Field(default_factory=list)

    def serves(self, tenant: str | None, task_type: str | None) -> bool:
        """Whether a request of `tenant` naming `task_type` is in this skill's scope.

        A request that names no task type is matched on the description alone; a tenant
        scope is never crossed (an unknown tenant sees agent-wide skills only)."""
        if self.tenants and tenant not in self.tenants:
            return False
        return not (self.task_types and task_type is not None and task_type not in self.task_types)


class SkillSet(ATDPModel):
    """The skills retrievable by this version, and how much of a prompt they may take."""

    items: list[Skill] = Field(default_factory=list)
    top_k: PositiveInt = Field(default=2, description="Most skills injected into one request.")
    max_chars: PositiveInt = Field(
        default=2000, description="Size budget: characters of skill text one request may carry."
    )

    @model_validator(mode="after")
    def _unique_names(self) -> SkillSet:
        names = [skill.name for skill in self.items]
        if len(names) != len(set(names)):
            raise ValueError("skill names must be unique within a version")
        return self


class Guardrails(ATDPModel):
    max_tokens: NonNegativeInt | None = None
    blocked_tools: list[Name] = Field(default_factory=list)
    required_redactions: list[Name] = Field(default_factory=list)


class VersionSpec(ATDPModel):
    """Everything that defines how an agent behaves at the gateway."""

    model: ModelRef
    harness: Harness = Field(default_factory=Harness)
    memory: MemorySnapshot = Field(default_factory=MemorySnapshot)
    tools: ToolSchemaOverlay = Field(default_factory=ToolSchemaOverlay)
    guardrails: Guardrails = Field(default_factory=Guardrails)
    skills: SkillSet = Field(default_factory=SkillSet)

    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of the spec (sorted keys, no whitespace)."""
        return self._hashes[0]

    def part_hashes(self) -> dict[str, str]:
        """A fingerprint per part, recorded in event metadata as the versions in force."""
        return dict(self._hashes[1])

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied; its hashes are computed afresh, not copied."""
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("_hashes", None)
        return copied

    @cached_property
    def _hashes(self) -> tuple[str, dict[str, str]]:
        # The spec is frozen, and the gateway asks for these on every request.
        dumped = self.model_dump(mode="json")
        if dumped["skills"] == _NO_SKILLS:
            # A version without skills hashes as it did before skills existed, so stored
            # versions keep their content hashes.
            del dumped["skills"]
        parts = {part: _canonical_hash(value)[:16] for part, value in dumped.items()}
        return _canonical_hash(dumped), parts


_NO_SKILLS = SkillSet().model_dump(mode="json")


def _canonical_hash(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()
