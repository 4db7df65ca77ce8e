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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import jsonschema
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, select

from atdp import EventKind, ToolOverride, Traffic, VersionSpec
from evolution.analysis import error_class_name, tool_parameter
from evolution.decision import DecisionRecord
from evolution.operators import Candidate, Operator, OperatorError
from evolution.window import FailureKind, WindowSpec
from registry import (
    AgentVersion,
    ToolCallRecord,
    TrajectoryWindow,
    tool_call_records,
    window_trajectories,
)
from registry.tables import EventRow

__all__ = [
    "ToolSchemaConfig",
    "infer_pattern",
    "infer_rules",
    "propose_tool_schema",
    "tool_schema_operator",
]


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


# -- learning a rule from successful values ---------------------------------------------

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TOKEN = re.compile(r"[A-Z]+|[a-z]+|[0-9]+|.", re.DOTALL)
_CLASSES = {"upper": "[A-Z]", "lower": "[a-z]", "digit": r"\d"}


def infer_rules(values: Sequence[object], config: ToolSchemaConfig | None = None) -> list[dict]:
    """JSON Schema keyword sets that every value satisfies, strictest first.

    The caller tries them in order and keeps the first that replay proves safe, so a
    closed set beats a pattern, and a pattern with a format beats either alone.
    """
    config = config or ToolSchemaConfig()
    distinct = list(dict.fromkeys(json.dumps(v, sort_keys=True) for v in values))
    rules: list[dict] = []
    if len(distinct) <= config.max_enum and len(values) >= config.enum_repeats * len(distinct):
        rules.append({"enum": sorted((json.loads(v) for v in distinct), key=json.dumps)})
    if values and all(isinstance(v, str) for v in values):
        strings = [str(v) for v in values]
        fmt, pattern = _format(strings), infer_pattern(strings)
        typed = {"type": "string"}
        if fmt and pattern:
            rules.append({**typed, "format": fmt, "pattern": pattern})
        if pattern:
            rules.append({**typed, "pattern": pattern})
        if fmt:
            rules.append({**typed, "format": fmt})
    return rules


def _format(values: Sequence[str]) -> str | None:
    """A JSON Schema format every value has (one the validator can check)."""
    if all(_DATE.match(v) and _is_date(v) for v in values):
        return "date"
    if all(_UUID.match(v) for v in values):
        return "uuid"
    if all(_EMAIL.match(v) for v in values):
        return "email"
    return None


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


def infer_pattern(values: Sequence[str]) -> str | None:
    """An anchored regex for values that share one shape: "ORD-123456" -> ^ORD-\\d{6}$.

    Values are read as runs of upper-case letters, lower-case letters, digits and single
    other characters; all values must have the same runs. Letters that never vary stay
    literal (a prefix); digits and varying letters become classes, with an exact length
    when every value agrees and `+` otherwise, so longer ids of the same shape still pass.
    None when the values have no shared shape or are too few to generalise from (two).
    """
    if len(set(values)) < 2:
        return None
    shapes = [_tokens(value) for value in values]
    first = shapes[0]
    if any([kind for kind, _ in shape] != [kind for kind, _ in first] for shape in shapes):
        return None
    parts = [_part([shape[i][1] for shape in shapes], first[i][0]) for i in range(len(first))]
    return "^" + "".join(parts) + "$"


def _tokens(value: str) -> list[tuple[str, str]]:
    """(kind, text) runs; other characters are their own kind, so separators must match."""
    return [(_kind(text), text) for text in _TOKEN.findall(value)]


def _kind(text: str) -> str:
    if text.isdigit() and text.isascii():
        return "digit"
    if text.isascii() and text.isalpha():
        return "upper" if text.isupper() else "lower"
    return "literal:" + text


def _part(texts: list[str], kind: str) -> str:
    if kind.startswith("literal:") or (kind != "digit" and len(set(texts)) == 1):
        return _literal(texts[0])
    lengths = {len(text) for text in texts}
    size = lengths.pop() if len(lengths) == 1 else None
    return _CLASSES[kind] + ("+" if size is None else "" if size == 1 else f"{{{size}}}")


def _literal(text: str) -> str:
    # A hyphen outside a character class is literal; leaving it bare keeps "ORD-" readable.
    return re.escape(text).replace("\\-", "-")


# -- the recorded calls ---------------------------------------------------------------

_ANONYMOUS_CALLS = frozenset({"", "agent-reported", "unknown"})


@dataclass(frozen=True)
class _Call:
    """One recorded call of the tool, with its arguments parsed (None when not an object)."""

    record: ToolCallRecord
    arguments: dict | None

    @property
    def failed(self) -> bool:
        return self.record.success is False or self.record.error_class is not None


def _window(spec: WindowSpec) -> TrajectoryWindow:
    return TrajectoryWindow(
        agent=spec.agent,
        tenants=tuple(spec.tenants) if spec.tenants is not None else None,
        version_ids=(spec.version_id,) if spec.version_id else None,
        since=spec.since,
        until=spec.until,
        last=spec.last,
    )


def _calls(session: Session, window: TrajectoryWindow, tool: str) -> list[_Call]:
    """The tool's calls, once each: a call recorded by the gateway and reported by the
    agent under the same id is one call, and the record that says it failed stands for it."""
    kept: dict[tuple, ToolCallRecord] = {}
    for record in tool_call_records(session, window):
        if record.tool != tool:
            continue
        anonymous = record.call_id in _ANONYMOUS_CALLS
        key = (record.event_id,) if anonymous else (record.trajectory_id, record.call_id)
        held = kept.get(key)
        if held is None or (_failed(record) and not _failed(held)):
            kept[key] = record
    return [_Call(record, _parse(record.arguments)) for record in kept.values()]


def _failed(record: ToolCallRecord) -> bool:
    return record.success is False or record.error_class is not None


def _parse(arguments: str) -> dict | None:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _in_cluster(call: _Call, parameter: str, error_class: str | None) -> bool:
    """The same test `evolution.analysis` clusters by: error class and named parameter."""
    record = call.record
    found = error_class_name(record.error_class) if record.error_class else "failed"
    return (error_class is None or found == error_class) and tool_parameter(record) == parameter


def _offered_spec(session: Session, window: TrajectoryWindow, tool: str) -> dict | None:
    """The tool as the window's llm calls offered it (the most frequent form), or None."""
    ids = [t.id for t in window_trajectories(session, window)]
    if not ids:
        return None
    statement = select(EventRow.body[("observation", "tools")]).where(
        EventRow.trajectory_id.in_(ids),
        EventRow.kind == EventKind.LLM_CALL.value,
        EventRow.traffic == Traffic.USER.value,
    )
    seen: Counter[str] = Counter()
    for specs in session.exec(statement):
        for item in specs or []:
            if item.get("name") == tool and item.get("parameters"):
                seen[json.dumps(item, sort_keys=True)] += 1
    if not seen:
        return None
    best = min(seen.items(), key=lambda pair: (-pair[1], pair[0]))[0]
    return json.loads(best)


# -- replay ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Replay:
    """How a schema (with its argument map) judges the recorded calls."""

    successes_valid: int
    failures_rejected: int
    accepted_successes: frozenset[int]
    rejected_failures: frozenset[int]


def _validator(schema: dict) -> jsonschema.protocols.Validator:
    cls = jsonschema.Draft202012Validator
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise OperatorError(f"the tool schema is not valid JSON Schema: {error.message}") from error
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _replay(
    schema: dict, argument_map: dict[str, str], successes: list[_Call], failures: list[_Call]
) -> _Replay:
    """Validate each call's arguments as the model would have had to write them."""
    validator = _validator(schema)
    to_model = {agent: model for model, agent in argument_map.items()}

    def valid(call: _Call) -> bool:
        if call.arguments is None:
            return False
        renamed = {to_model.get(key, key): value for key, value in call.arguments.items()}
        return validator.is_valid(renamed)

    accepted = frozenset(i for i, call in enumerate(successes) if valid(call))
    rejected = frozenset(i for i, call in enumerate(failures) if not valid(call))
    return _Replay(len(accepted), len(rejected), accepted, rejected)


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


def _required(schema: dict, name: str, successes: list[_Call], agent_name: str) -> dict:
    """Mark the parameter required when every successful call gave it."""
    if name in schema.get("required", []):
        return schema
    if not successes or any(agent_name not in (c.arguments or {}) for c in successes):
        return schema
    return {**schema, "required": [*schema.get("required", []), name]}


_HINT = re.compile(r"\b(expected|must|should|format|e\.g\.|like|pattern)\b", re.IGNORECASE)
_HINT_CHARS = 160


def _hint(failures: Iterable[_Call]) -> str | None:
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


def _value(call: _Call, parameter: str) -> Any:
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
    traffic = _window(window)
    successes, failures = _split(_calls(session, traffic, target.tool), target)
    given = [c for c in successes if target.parameter in (c.arguments or {})]
    if len(given) < config.min_successes:
        raise OperatorError(
            f"only {len(given)} successful calls of {target.tool} gave {target.parameter} "
            f"(< {config.min_successes}); nothing to learn its format from"
        )
    offered = _offered_spec(session, traffic, target.tool)
    override = parent.spec.tools.tools.get(target.tool, ToolOverride())
    base = override.parameters or (offered or {}).get("parameters")
    if not base:
        raise OperatorError(f"the window never offered {target.tool} with a parameter schema")
    offered_schema = (offered or {}).get("parameters") or base
    to_model = {agent: model for model, agent in override.argument_map.items()}
    name = to_model.get(target.parameter, target.parameter)
    if name not in base.get("properties", {}):
        raise OperatorError(f"the schema of {target.tool} has no parameter {name}")
    before = _replay(offered_schema, dict(override.argument_map), successes, failures)
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
    rule, final, after = chosen or ({}, schema, _replay(schema, argument_map, successes, failures))
    description = override.description or (offered or {}).get("description")
    sentence = _rule_text(model_name, rule, examples[0]) if rule else None
    tool_override = ToolOverride(
        description=_appended(description, _sentence(sentence, hint)) if sentence else description,
        parameters=final,
        argument_map=argument_map,
    )
    spec = _with_override(parent.spec, target.tool, tool_override)
    return _candidate(spec, target, model_name, rule, new_name, successes, failures, before, after)


def _split(calls: list[_Call], target: _Target) -> tuple[list[_Call], list[_Call]]:
    """Calls known to have worked, and the failures that belong to the target cluster.

    A call whose outcome was never reported (success None) teaches nothing either way.
    """
    successes = [c for c in calls if c.record.success is True and not c.failed]
    failures = [
        c for c in calls if c.failed and _in_cluster(c, target.parameter, target.error_class)
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
    successes: list[_Call],
    failures: list[_Call],
    before: _Replay,
) -> tuple[dict, dict, _Replay] | None:
    """The strictest rule that keeps every success the offered schema accepted and newly
    rejects at least one failure; None when no rule is both safe and useful."""
    for rule in rules:
        schema = build(rule)
        after = _replay(schema, argument_map, successes, failures)
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
    successes: list[_Call],
    failures: list[_Call],
    before: _Replay,
    after: _Replay,
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
