"""Verifiable rewards for sampled completions: checks a program can make, no judge needed.

GRPO learns only from groups whose samples differ in reward, so a reward must separate a
right decision from a wrong one sharply: here, whether the sample calls the prompt's
reference tool with arguments the agent's tool accepts.

A call is judged as the agent receives it. Under a tool-schema overlay the model sees a
schema of the version's making, and the gateway renames the arguments of its calls back to
the agent's names (`ToolOverride.argument_map`) before the agent's tool validates them; a call
written in the agent's own names passes through unrenamed and works too. Judged against the
model's schema alone, such a call would score as broken, and training would push the model
away from calls that succeed in service.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from atdp.tool_text import parse_tool_calls
from evolution.rl.samples import RecordedPrompt

__all__ = ["GroupReward", "RewardFunction", "ToolCallReward"]


class RewardFunction(Protocol):
    """Scores one sampled completion text of a recorded prompt, in [0, 1]."""

    def __call__(self, prompt: RecordedPrompt, text: str) -> float: ...


@runtime_checkable
class GroupReward(Protocol):
    """Scores a group of completions of one prompt together (a relative judge's reward,
    `evolution.rl.data.judge.JudgedReward`); `rated` holds the explicit rewards recorded
    for some of them (None elsewhere). It may train prompts without a reference."""

    def __call__(self, prompt: RecordedPrompt, text: str) -> float: ...

    def score_group(
        self, prompt: RecordedPrompt, texts: Sequence[str], rated: Sequence[float | None]
    ) -> list[float]: ...


class ToolCallReward:
    """1 for exactly one call of the reference tool with schema-valid arguments, else 0.

    Args:
        match_arguments: also require the reference's argument values (else any valid ones).
        format_credit: reward for a well-formed call of the wrong tool (an offered one, with
            arguments valid for it); a little credit keeps the output structure from
            drifting while the decision is learned.
    """

    def __init__(self, *, match_arguments: bool = False, format_credit: float = 0.0) -> None:
        self.match_arguments = match_arguments
        self.format_credit = format_credit

    def __call__(self, prompt: RecordedPrompt, text: str) -> float:
        if prompt.reference is None:
            return 0.0
        content, calls = parse_tool_calls(text)
        if len(calls) != 1 or (content or "").strip():
            return 0.0
        name = calls[0]["function"]["name"]
        try:
            arguments = json.loads(calls[0]["function"]["arguments"])
        except ValueError:
            return 0.0
        if _schema(prompt.tools, name) is None:  # not offered to the model: never served
            return 0.0
        received = _as_received(prompt, name, arguments)
        if not _valid(received, _schema(prompt.agent_tools or prompt.tools, name)):
            return 0.0
        if name != prompt.reference["name"]:
            return self.format_credit
        if self.match_arguments and received != _as_received(
            prompt, name, prompt.reference.get("arguments")
        ):
            return self.format_credit
        return 1.0


def _as_received(prompt: RecordedPrompt, name: str, arguments: Any) -> Any:
    """A call's arguments under the agent's names, as the gateway hands them over."""
    mapping = prompt.argument_maps.get(name)
    if not mapping or not isinstance(arguments, dict):
        return arguments
    return {mapping.get(key, key): value for key, value in arguments.items()}


def _schema(tools: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    for tool in tools:
        function = tool.get("function") or {}
        if function.get("name") == name:
            return function.get("parameters") or {}
    return None


def _valid(arguments: Any, schema: dict[str, Any] | None) -> bool:
    import jsonschema

    if schema is None:
        return False
    try:
        jsonschema.validate(arguments, schema)
    except jsonschema.ValidationError:
        return False
    return True
