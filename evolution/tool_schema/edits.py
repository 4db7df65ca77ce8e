"""Edits of one tool's model-facing schema: the parameter under edit, a rule written into
it with examples and words, a clearer or corrected name, and the edit's proof."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from atdp import ToolOverride
from evolution.tool_schema.calls import RecordedCall
from evolution.tool_schema.validation import CallValidation

__all__ = [
    "Edit",
    "OfferedTool",
    "Target",
    "appended",
    "clearer_name",
    "hint",
    "renamed",
    "required",
    "required_by_successes",
    "rule_text",
    "with_rule",
]


@dataclass(frozen=True)
class Target:
    """The cluster's tool, the parameter its errors name (the agent's name), its class."""

    tool: str
    parameter: str
    error_class: str | None


@dataclass(frozen=True)
class OfferedTool:
    """The tool as the parent version shows it to the model.

    Args:
        override: the parent's override of the tool (empty when it has none).
        schema: the parent's model-facing parameters (its override's, else the offered).
        offered_schema: the parameters the window's llm calls offered.
        description: the parent's description of the tool.
    """

    override: ToolOverride
    schema: dict
    offered_schema: dict
    description: str | None

    @property
    def to_model(self) -> dict[str, str]:
        """The agent's argument names -> the names the model sees."""
        return {agent: model for model, agent in self.override.argument_map.items()}

    def model_name(self, agent_name: str) -> str:
        return self.to_model.get(agent_name, agent_name)


@dataclass(frozen=True)
class Edit:
    """A proposed edit of the tool's schema and what proves it.

    Args:
        rule: the JSON Schema keywords the parameter gains (empty for a rename alone).
        schema: the candidate's parameters.
        argument_map: the candidate's model-facing name -> agent's name map for the tool.
        model_name: the parameter's name as the model now sees it.
        renamed: the new model-facing name, when the edit renames the parameter.
        sentence: the rule in words, for the tool's description.
        after: the candidate's validation of the recorded calls.
        learned_from: where the rule came from, in words ("12 error messages").
        replay: the replay numbers in words.
        changes: what changed, in words, besides the rule and the replay.
        evidence: the learner's own evidence, added to the candidate's.
    """

    rule: dict
    schema: dict
    argument_map: dict[str, str]
    model_name: str
    renamed: str | None
    sentence: str | None
    after: CallValidation
    learned_from: str
    replay: str
    changes: list[str] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)


_AMBIGUOUS = frozenset({"id", "key", "code", "ref", "reference", "number", "num", "identifier"})
_VERBS = frozenset(
    {
        "get",
        "lookup",
        "look",
        "up",
        "find",
        "fetch",
        "search",
        "list",
        "create",
        "update",
        "delete",
        "cancel",
        "check",
        "read",
        "set",
        "query",
        "retrieve",
        "show",
        "track",
        "by",
    }
)


def clearer_name(tool: str, model_name: str, properties: dict) -> str | None:
    """`id` on a tool with several id-like parameters -> `<noun of the tool>_id`.

    A generic name is ambiguous only when the model has something to confuse it with;
    the noun comes from the tool's name (`lookup_order` -> `order`).
    """
    if model_name not in _AMBIGUOUS:
        return None
    others = [name for name in properties if name != model_name]
    if not any(name == "id" or name.endswith(("_id", "Id")) for name in others):
        return None
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", tool).lower().split("_")
    noun = "_".join(word for word in words if word and word not in _VERBS)
    new = f"{noun}_{model_name}" if noun else None
    return new if new and new not in properties else None


def renamed(schema: dict, old: str, new: str) -> dict:
    properties = {new if k == old else k: v for k, v in schema.get("properties", {}).items()}
    renamed = {**schema, "properties": properties}
    if "required" in schema:
        renamed["required"] = [new if name == old else name for name in schema["required"]]
    return renamed


def rule_text(name: str, rule: dict, example: object | None) -> str:
    """The rule in words, with an example when there is one, for descriptions the model reads."""
    if "enum" in rule:
        return f"`{name}` must be one of: {', '.join(json.dumps(v) for v in rule['enum'])}."
    parts = [f"type {rule['type']}"] if rule.get("type", "string") != "string" else []
    parts += [f"format {rule['format']}"] if "format" in rule else []
    parts += [f"pattern {rule['pattern']}"] if "pattern" in rule else []
    if example is None:
        return f"`{name}` must have {', '.join(parts)}."
    return f"`{name}` must look like {json.dumps(example)} ({', '.join(parts)})."


def appended(text: str | None, sentence: str) -> str:
    """The original text with the sentence added once (so reapplying changes nothing)."""
    text = (text or "").strip()
    if sentence in text:
        return text
    return f"{text} {sentence}".strip()


def with_rule(schema: dict, name: str, rule: dict, examples: list, sentence: str) -> dict:
    properties = dict(schema.get("properties", {}))
    prop = {**properties[name], **rule}
    if "enum" in rule:
        prop.pop("pattern", None)
    if examples:
        prop["examples"] = examples
    prop["description"] = appended(prop.get("description"), sentence)
    properties[name] = prop
    return {**schema, "properties": properties}


def required_by_successes(
    schema: dict, name: str, successes: list[RecordedCall], agent_name: str
) -> dict:
    """Mark the parameter required when every successful call gave it."""
    if not successes or any(agent_name not in (c.arguments or {}) for c in successes):
        return schema
    return required(schema, name)


def required(schema: dict, name: str) -> dict:
    """The schema with `name` required (once)."""
    if name in schema.get("required", []):
        return schema
    return {**schema, "required": [*schema.get("required", []), name]}


_HINT = re.compile(r"\b(expected|must|should|format|e\.g\.|like|pattern)\b", re.IGNORECASE)
_HINT_CHARS = 160


def hint(failures: Iterable[RecordedCall]) -> str | None:
    """The tool's own most frequent words on the expected format, if it gave any."""
    texts: Counter[str] = Counter()
    for call in failures:
        text = call.record.error_message or _text(call.record.tool_return)
        if text and _HINT.search(text):
            texts[" ".join(text.split())[:_HINT_CHARS]] += 1
    if not texts:
        return None
    return min(texts.items(), key=lambda pair: (-pair[1], pair[0]))[0]


def _text(value: object) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)
