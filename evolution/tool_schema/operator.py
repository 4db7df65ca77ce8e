"""The tool-schema operator: learn what one parameter's values must look like, and say so.

A TOOL_ARGUMENT cluster says the model keeps calling a tool with a value the tool refuses.
The window's successful calls of that tool show what the tool accepts, so the operator
learns a rule from them only (an enum of a small closed set, a pattern, a format), writes
it into the model-facing schema with examples and a clearer description, and may rename an
ambiguous parameter (`id` -> `order_id`) with an argument map back to the agent's name.

The edit is proven by tool-call replay: every recorded call of the tool is validated
(JSON Schema 2020-12) against the schema the model was offered and against the candidate.
A rule that rejects any successful call the offered schema accepted is too strict and is
loosened; one that rejects none of the failures does not address the cluster. The gateway
applies the result (`proxy.overlays`); this module never imports it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from atdp import ToolOverride, VersionSpec
from evolution.decision import DecisionRecord
from evolution.operators import Candidate, Operator, OperatorError
from evolution.tool_schema.calls import (
    RecordedCall,
    in_cluster,
    offered_spec,
    recorded_calls,
    trajectory_window,
)
from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.replay import Replay, replay_calls
from evolution.tool_schema.rules import infer_rules
from evolution.window import FailureKind, WindowSpec
from registry import AgentVersion

__all__ = ["propose_tool_schema", "tool_schema_operator"]


# -- the candidate schema -------------------------------------------------------------

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


def _clearer_name(tool: str, model_name: str, properties: dict) -> str | None:
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


def _renamed(schema: dict, old: str, new: str) -> dict:
    properties = {new if k == old else k: v for k, v in schema.get("properties", {}).items()}
    renamed = {**schema, "properties": properties}
    if "required" in schema:
        renamed["required"] = [new if name == old else name for name in schema["required"]]
    return renamed


def _rule_text(name: str, rule: dict, example: object) -> str:
    """The rule in words, with an example, for descriptions the model reads."""
    if "enum" in rule:
        return f"`{name}` must be one of: {', '.join(json.dumps(v) for v in rule['enum'])}."
    parts = [f"format {rule['format']}"] if "format" in rule else []
    parts += [f"pattern {rule['pattern']}"] if "pattern" in rule else []
    return f"`{name}` must look like {json.dumps(example)} ({', '.join(parts)})."


def _appended(text: str | None, sentence: str) -> str:
    """The original text with the sentence added once (so reapplying changes nothing)."""
    text = (text or "").strip()
    if sentence in text:
        return text
    return f"{text} {sentence}".strip()


def _with_rule(schema: dict, name: str, rule: dict, examples: list, sentence: str) -> dict:
    properties = dict(schema.get("properties", {}))
    prop = {**properties[name], **rule}
    if "enum" in rule:
        prop.pop("pattern", None)
    prop["examples"] = examples
    prop["description"] = _appended(prop.get("description"), sentence)
    properties[name] = prop
    return {**schema, "properties": properties}


def _required(schema: dict, name: str, successes: list[RecordedCall], agent_name: str) -> dict:
    """Mark the parameter required when every successful call gave it."""
    if name in schema.get("required", []):
        return schema
    if not successes or any(agent_name not in (c.arguments or {}) for c in successes):
        return schema
    return {**schema, "required": [*schema.get("required", []), name]}


_HINT = re.compile(r"\b(expected|must|should|format|e\.g\.|like|pattern)\b", re.IGNORECASE)
_HINT_CHARS = 160


def _hint(failures: Iterable[RecordedCall]) -> str | None:
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


# -- the operator ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Target:
    tool: str
    parameter: str
    error_class: str | None


def _target(decision: DecisionRecord) -> _Target:
    cluster = decision.target
    if cluster is None or cluster.kind is not FailureKind.TOOL_ARGUMENT:
        raise OperatorError("the tool-schema operator needs a tool_argument failure cluster")
    if not cluster.tool or not cluster.parameter:
        raise OperatorError(f"cluster '{cluster.key}' names no tool parameter to constrain")
    return _Target(cluster.tool, cluster.parameter, cluster.error_class)


def _value(call: RecordedCall, parameter: str) -> Any:
    return (call.arguments or {}).get(parameter)


def propose_tool_schema(
    session: Session,
    parent: AgentVersion,
    decision: DecisionRecord,
    window: WindowSpec,
    *,
    config: ToolSchemaConfig | None = None,
) -> Candidate:
    """A candidate whose schema for the cluster's tool states what its parameter must be.

    Raises:
        OperatorError: no rule learned from successful calls separates them from the
            cluster's failures (too few successes, no shared shape, no recorded schema).
    """
    config = config or ToolSchemaConfig()
    target = _target(decision)
    traffic = trajectory_window(window)
    successes, failures = _split(recorded_calls(session, traffic, target.tool), target)
    given = [c for c in successes if target.parameter in (c.arguments or {})]
    if len(given) < config.min_successes:
        raise OperatorError(
            f"only {len(given)} successful calls of {target.tool} gave {target.parameter} "
            f"(< {config.min_successes}); nothing to learn its format from"
        )
    offered = offered_spec(session, traffic, target.tool)
    override = parent.spec.tools.tools.get(target.tool, ToolOverride())
    base = override.parameters or (offered or {}).get("parameters")
    if not base:
        raise OperatorError(f"the window never offered {target.tool} with a parameter schema")
    offered_schema = (offered or {}).get("parameters") or base
    to_model = {agent: model for model, agent in override.argument_map.items()}
    name = to_model.get(target.parameter, target.parameter)
    if name not in base.get("properties", {}):
        raise OperatorError(f"the schema of {target.tool} has no parameter {name}")
    before = replay_calls(offered_schema, dict(override.argument_map), successes, failures)
    new_name = _clearer_name(target.tool, name, base["properties"]) if config.rename else None
    argument_map = dict(override.argument_map)
    schema = _required(base, name, successes, target.parameter)
    if new_name:
        schema = _renamed(schema, name, new_name)
        argument_map = {k: v for k, v in argument_map.items() if k != name}
        argument_map[new_name] = target.parameter
    model_name = new_name or name
    values = [_value(c, target.parameter) for c in given]
    examples = sorted(dict.fromkeys(values), key=json.dumps)[: config.max_examples]
    hint = _hint(failures)
    chosen = _choose(
        infer_rules(values, config),
        lambda rule: _with_rule(
            schema, model_name, rule, examples, _rule_text(model_name, rule, examples[0])
        ),
        argument_map,
        successes,
        failures,
        before,
    )
    if chosen is None and not new_name:
        raise OperatorError(
            f"no rule learned from {len(given)} successful values of {target.tool}."
            f"{target.parameter} rejects any of the {len(failures)} failing calls "
            "without rejecting a successful one"
        )
    rule, final, after = chosen or (
        {},
        schema,
        replay_calls(schema, argument_map, successes, failures),
    )
    description = override.description or (offered or {}).get("description")
    sentence = _rule_text(model_name, rule, examples[0]) if rule else None
    tool_override = ToolOverride(
        description=_appended(description, _sentence(sentence, hint)) if sentence else description,
        parameters=final,
        argument_map=argument_map,
    )
    spec = _with_override(parent.spec, target.tool, tool_override)
    return _candidate(spec, target, model_name, rule, new_name, successes, failures, before, after)


def _split(
    calls: list[RecordedCall], target: _Target
) -> tuple[list[RecordedCall], list[RecordedCall]]:
    """Calls known to have worked, and the failures that belong to the target cluster.

    A call whose outcome was never reported (success None) teaches nothing either way.
    """
    successes = [c for c in calls if c.record.success is True and not c.failed]
    failures = [
        c for c in calls if c.failed and in_cluster(c, target.parameter, target.error_class)
    ]
    return successes, failures


def _with_override(spec: VersionSpec, tool: str, override: ToolOverride) -> VersionSpec:
    """A new spec with `tool`'s override replaced; the parent's spec is never touched."""
    tools = {**spec.tools.tools, tool: override}
    dumped = spec.model_dump(mode="json")
    dumped["tools"] = {"tools": {name: o.model_dump(mode="json") for name, o in tools.items()}}
    return VersionSpec.model_validate(dumped)


def _sentence(rule_text: str | None, hint: str | None) -> str:
    text = rule_text or ""
    return f"{text} The tool reports: {json.dumps(hint)}." if hint else text


def _choose(
    rules: list[dict],
    build: Callable[[dict], dict],
    argument_map: dict[str, str],
    successes: list[RecordedCall],
    failures: list[RecordedCall],
    before: Replay,
) -> tuple[dict, dict, Replay] | None:
    """The strictest rule that keeps every success the offered schema accepted and newly
    rejects at least one failure; None when no rule is both safe and useful."""
    for rule in rules:
        schema = build(rule)
        after = replay_calls(schema, argument_map, successes, failures)
        keeps = before.accepted_successes <= after.accepted_successes
        if keeps and after.rejected_failures - before.rejected_failures:
            return rule, schema, after
    return None


def _candidate(
    spec: VersionSpec,
    target: _Target,
    model_name: str,
    rule: dict,
    new_name: str | None,
    successes: list[RecordedCall],
    failures: list[RecordedCall],
    before: Replay,
    after: Replay,
) -> Candidate:
    where = f"{target.tool}.{target.parameter}"
    newly = len(after.rejected_failures - before.rejected_failures)
    replay = (
        f"{after.successes_valid} of {len(successes)} successful calls validate; "
        f"{after.failures_rejected} of {len(failures)} failing calls violate the new schema "
        f"({before.failures_rejected} already violated the offered one)"
    )
    changes = [f"{where}: {_keywords(rule)} learned from {len(successes)} successful calls"]
    if rule:
        changes.append(f"{where}: description states the rule with an example")
    if new_name:
        changes.append(
            f"{where}: shown to the model as {new_name} (argument_map {new_name} -> "
            f"{target.parameter})"
        )
    changes.append(f"replay: {replay}")
    evidence = {
        "tool": target.tool,
        "parameter": target.parameter,
        "model_parameter": model_name,
        "error_class": target.error_class,
        "rule": rule,
        "renamed": new_name,
        "successful_calls": len(successes),
        "failing_calls": len(failures),
        "successes_valid_offered": before.successes_valid,
        "successes_valid_candidate": after.successes_valid,
        "failures_rejected_offered": before.failures_rejected,
        "failures_rejected_candidate": after.failures_rejected,
        "failures_newly_rejected": newly,
        "success_event_ids": [str(c.record.event_id) for c in successes[:5]],
        "failure_event_ids": [str(c.record.event_id) for c in failures[:5]],
        "replay": replay,
    }
    summary = (
        f"tool schema {where}: {_keywords(rule)}; {newly} of {len(failures)} recorded "
        f"failures now caught, {after.successes_valid} of {len(successes)} successes valid"
    )
    return Candidate(spec=spec, summary=summary, changes=changes, evidence=evidence)


def _keywords(rule: dict) -> str:
    if not rule:
        return "no value rule"
    return ", ".join(f"{key} {json.dumps(value)}" for key, value in sorted(rule.items()))


def tool_schema_operator(config: ToolSchemaConfig) -> Operator:
    """`propose_tool_schema` bound to `config`, in the shape every operator has."""

    def operator(
        session: Session, parent: AgentVersion, decision: DecisionRecord, window: WindowSpec
    ) -> Candidate:
        return propose_tool_schema(session, parent, decision, window, config=config)

    return operator
