"""Learning a parameter's rule from the calls that succeeded.

The window's successful calls show what the tool accepts, so a rule learned from their
values (an enum of a small closed set, a pattern, a format) is tried strictest first; the
first that keeps every success the offered schema accepted and newly rejects some of the
cluster's failures is the edit. An ambiguous name (`id` next to `customer_id`) may also be
shown to the model under a clearer one, mapped back to the agent's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from evolution.operators import OperatorError
from evolution.tool_schema.calls import RecordedCall
from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.edits import (
    Edit,
    OfferedTool,
    Target,
    clearer_name,
    hint,
    renamed,
    required_by_successes,
    rule_text,
    with_rule,
)
from evolution.tool_schema.rules import infer_rules
from evolution.tool_schema.validation import CallValidation, validate_calls

__all__ = ["edit_from_successes", "with_clearer_name"]


def edit_from_successes(
    tool: OfferedTool,
    target: Target,
    successes: list[RecordedCall],
    failures: list[RecordedCall],
    before: CallValidation,
    config: ToolSchemaConfig,
) -> Edit:
    """The strictest rule learned from the successful values that replay proves safe.

    Raises:
        OperatorError: no such rule, and no clearer name to propose either.
    """
    name = tool.model_name(target.parameter)
    if name not in tool.schema.get("properties", {}):
        raise OperatorError(f"the schema of {target.tool} has no parameter {name}")
    given = [c for c in successes if target.parameter in (c.arguments or {})]
    schema = required_by_successes(tool.schema, name, successes, target.parameter)
    schema, argument_map, new_name = with_clearer_name(tool, target, schema, config)
    model_name = new_name or name
    values = [_value(c, target.parameter) for c in given]
    examples = sorted(dict.fromkeys(values), key=json.dumps)[: config.max_examples]

    def build(rule: dict) -> dict:
        sentence = rule_text(model_name, rule, examples[0])
        return with_rule(schema, model_name, rule, examples, sentence)

    rules = infer_rules(values, config)
    chosen = _choose(rules, build, argument_map, successes, failures, before)
    if chosen is None and not new_name:
        raise OperatorError(
            f"no rule learned from {len(given)} successful values of {target.tool}."
            f"{target.parameter} rejects any of the {len(failures)} failing calls "
            "without rejecting a successful one"
        )
    rule, final, after = chosen or (
        {},
        schema,
        validate_calls(schema, argument_map, successes, failures),
    )
    sentence = rule_text(model_name, rule, examples[0]) if rule else None
    told = hint(failures)
    return Edit(
        rule=rule,
        schema=final,
        argument_map=argument_map,
        model_name=model_name,
        renamed=new_name,
        sentence=f"{sentence} The tool reports: {json.dumps(told)}."
        if sentence and told
        else sentence,
        after=after,
        learned_from=f"{len(successes)} successful calls",
        replay=_replay_text(after, before, successes, failures),
        evidence={"rule_source": "successful calls"},
    )


def with_clearer_name(
    tool: OfferedTool, target: Target, schema: dict, config: ToolSchemaConfig
) -> tuple[dict, dict[str, str], str | None]:
    """The schema and argument map with an ambiguous name shown to the model under a
    clearer one mapped back to the agent's name, and that name (None when unchanged)."""
    name = tool.model_name(target.parameter)
    argument_map = dict(tool.override.argument_map)
    new_name = clearer_name(target.tool, name, schema["properties"]) if config.rename else None
    if not new_name:
        return schema, argument_map, None
    argument_map = {k: v for k, v in argument_map.items() if k != name}
    argument_map[new_name] = target.parameter
    return renamed(schema, name, new_name), argument_map, new_name


def _value(call: RecordedCall, parameter: str) -> Any:
    return (call.arguments or {}).get(parameter)


def _choose(
    rules: list[dict],
    build: Callable[[dict], dict],
    argument_map: dict[str, str],
    successes: list[RecordedCall],
    failures: list[RecordedCall],
    before: CallValidation,
) -> tuple[dict, dict, CallValidation] | None:
    """The strictest rule that keeps every success the offered schema accepted and newly
    rejects at least one failure; None when no rule is both safe and useful."""
    for rule in rules:
        schema = build(rule)
        after = validate_calls(schema, argument_map, successes, failures)
        keeps = before.accepted_successes <= after.accepted_successes
        if keeps and after.rejected_failures - before.rejected_failures:
            return rule, schema, after
    return None


def _replay_text(
    after: CallValidation,
    before: CallValidation,
    successes: list[RecordedCall],
    failures: list[RecordedCall],
) -> str:
    return (
        f"{after.successes_valid} of {len(successes)} successful calls validate; "
        f"{after.failures_rejected} of {len(failures)} failing calls violate the new schema "
        f"({before.failures_rejected} already violated the offered one)"
    )
