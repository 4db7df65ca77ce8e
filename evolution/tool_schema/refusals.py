"""Learning a parameter's rule from the tool's refusals, when too few calls succeeded.

A break that refuses every call leaves no success to learn from, but the tool usually
says in each refusal what it wants (`evolution.tool_schema.errors`): a pattern, a closed
set, examples, a layout, a type, or another name for the parameter. Those words, or the
tool's own description when the refusals say nothing, give the rules, tried strictest
first together with any successful values. A rule is kept only when a simulator built from
the refusals (`RefusalSimulator`) finds that it rejects every refused call the tool's words
call wrong and accepts every example the tool gave, while every success stays valid.

When the refusals say the tool no longer knows the agent's name for the parameter and
requires another, the model is shown the tool's name with no argument map: the refusal
shows the agent passes the model's name on to the tool, so mapping back to the old name
would send the refused name again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from evolution.operators import OperatorError
from evolution.tool_schema.calls import RecordedCall
from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.edits import (
    Edit,
    OfferedTool,
    Target,
    renamed,
    required,
    rule_text,
    with_rule,
)
from evolution.tool_schema.errors import read_description, read_refusal
from evolution.tool_schema.rules import claims, example_of, stated_rules
from evolution.tool_schema.statement import Names, Statement, merged
from evolution.tool_schema.successes import with_clearer_name
from evolution.tool_schema.validation import (
    CallValidation,
    RefusalJudgement,
    RefusalSimulator,
    validate_calls,
    validator,
)

__all__ = ["edit_from_refusals"]


@dataclass(frozen=True)
class _Trial:
    """One rule tried: the candidate schema it gives, its validation of the recorded calls and
    how it does against what the refusals say."""

    rule: dict
    examples: list[object]
    schema: dict
    after: CallValidation
    judged: RefusalJudgement


@dataclass(frozen=True)
class _Reading:
    """What the refusals say, and the shape of the schema before any rule is added."""

    statements: list[Statement]
    stated: Statement  # the words the rule is learned from
    source: str  # "refusals" or "description"
    schema: dict
    argument_map: dict[str, str]
    model_name: str
    renamed: str | None
    tool_rename: tuple[str, str] | None  # (the agent's name refused, the tool's name)
    required: bool  # the tool says the parameter is required
    parameters: tuple[str, ...]  # the agent's names the value comes under


def edit_from_refusals(
    tool: OfferedTool,
    target: Target,
    successes: list[RecordedCall],
    failures: list[RecordedCall],
    before: CallValidation,
    config: ToolSchemaConfig,
) -> Edit:
    """The strictest rule the refusals (or the description) state that the refusal
    simulator and the replay of the recorded calls prove.

    Raises:
        OperatorError: the words state no rule, or none that separates (contradictory
            statements, examples the stated pattern rejects, successes it would break).
    """
    reading = _read(tool, target, failures, config)
    values = [v for c in successes for v in _values(c, reading.parameters)[:1]]
    simulator = _simulator(reading, failures)
    rules = _rules(reading, values)
    if not rules:
        raise OperatorError(_nothing_stated(target, reading, len(values), config))
    for rule in rules:
        examples = _examples(rule, reading.stated, values, config)
        schema = _built(reading, rule, examples)
        after = validate_calls(schema, reading.argument_map, successes, failures)
        judged = simulator.judge(schema, reading.model_name, after)
        trial = _Trial(rule, examples, schema, after, judged)
        if _proven(before, trial):
            return _edit(target, reading, trial, before, successes, len(values))
    raise OperatorError(_no_separating_rule(target, reading, values, simulator))


def _simulator(reading: _Reading, failures: list[RecordedCall]) -> RefusalSimulator:
    rename = reading.tool_rename
    return RefusalSimulator(
        failures=failures,
        statements=reading.statements,
        evidence=reading.stated,
        parameters=reading.parameters,
        unknown=frozenset([rename[0]]) if rename else frozenset(),
        required=reading.required,
        examples=reading.stated.examples,
    )


def _rules(reading: _Reading, values: list[object]) -> list[dict]:
    """The stated rules, strictest first; a rename or a requirement may stand alone."""
    rules = stated_rules(reading.stated, values) if reading.stated.states_a_rule else []
    structural = reading.tool_rename is not None or reading.required
    return rules + [{}] if structural else rules


def _read(
    tool: OfferedTool, target: Target, failures: list[RecordedCall], config: ToolSchemaConfig
) -> _Reading:
    statements, rename, names = _refusals(tool, target, failures)
    evidence = merged(statements)
    old = tool.model_name(rename[0] if rename else target.parameter)
    if old not in tool.schema.get("properties", {}):
        raise OperatorError(_unknown_parameter(target, tool, evidence))
    described = _described(tool, old, names)
    source = "description" if _described_only(evidence, described) else "refusals"
    stated = described if source == "description" else evidence
    says_required = not rename and target.parameter in evidence.missing
    schema, argument_map, model_name, clearer = _shaped(tool, target, rename, says_required, config)
    parameters = (rename[0], rename[1]) if rename else (target.parameter,)
    return _Reading(
        statements=statements,
        stated=stated,
        source=source,
        schema=schema,
        argument_map=argument_map,
        model_name=model_name,
        renamed=clearer,
        tool_rename=rename,
        required=says_required,
        parameters=parameters,
    )


def _refusals(
    tool: OfferedTool, target: Target, failures: list[RecordedCall]
) -> tuple[list[Statement], tuple[str, str] | None, Names]:
    """What each refusal says, the rename they ask for, and the names read as the
    parameter's (both of a renamed one's)."""
    names = _names(tool, target, failures)
    statements = [_refusal(call, names) for call in failures]
    rename = _tool_rename(merged(statements), target, tool)
    if rename:
        names = Names(names.ours | set(rename), names.others - set(rename))
        statements = [_refusal(call, names) for call in failures]
    return statements, rename, names


def _described_only(evidence: Statement, described: Statement) -> bool:
    """The refusals say nothing of the value and the description does: it is the evidence."""
    return not evidence.states_a_rule and described.states_a_rule


def _names(tool: OfferedTool, target: Target, failures: list[RecordedCall]) -> Names:
    """The parameter's names, and its siblings' (in the schema or in the calls)."""
    ours = {target.parameter, tool.model_name(target.parameter)}
    siblings = set(tool.schema.get("properties", {})) | set(tool.override.argument_map.values())
    siblings |= {key for call in failures for key in (call.arguments or {})}
    return Names(frozenset(ours), frozenset(siblings - ours))


def _refusal(call: RecordedCall, names: Names) -> Statement:
    return read_refusal(call.record.error_message, call.record.tool_return, names)


def _described(tool: OfferedTool, model_name: str, names: Names) -> Statement:
    """What the parameter's description and the sentences of the tool's that name it say."""
    prop = tool.schema.get("properties", {}).get(model_name) or {}
    own = read_description(prop.get("description"), names, own=True)
    return merged([own, read_description(tool.description, names, own=False)])


def _tool_rename(evidence: Statement, target: Target, tool: OfferedTool) -> tuple[str, str] | None:
    """(the agent's name the tool does not know, the name it requires instead) when the
    refusals say exactly one of each and one of them is the cluster's parameter."""
    properties = tool.schema.get("properties", {})
    offered = {tool.override.argument_map.get(name, name) for name in properties}
    unknown = [name for name in evidence.unknown if name in offered]
    wanted = [name for name in evidence.missing if name not in offered and name not in properties]
    if len(unknown) != 1 or len(wanted) != 1 or target.parameter not in (*unknown, *wanted):
        return None
    return unknown[0], wanted[0]


def _shaped(
    tool: OfferedTool,
    target: Target,
    rename: tuple[str, str] | None,
    says_required: bool,
    config: ToolSchemaConfig,
) -> tuple[dict, dict[str, str], str, str | None]:
    """(schema, argument map, model-facing name, clearer name) before a rule is added."""
    if rename:
        old, new = tool.model_name(rename[0]), rename[1]
        schema = required(renamed(tool.schema, old, new), new)
        argument_map = {k: v for k, v in tool.override.argument_map.items() if k != old}
        return schema, argument_map, new, None
    name = tool.model_name(target.parameter)
    schema = required(tool.schema, name) if says_required else tool.schema
    schema, argument_map, clearer = with_clearer_name(tool, target, schema, config)
    return schema, argument_map, clearer or name, clearer


def _values(call: RecordedCall, names: Sequence[str]) -> list[object]:
    arguments = call.arguments or {}
    return [arguments[name] for name in names if name in arguments]


def _examples(
    rule: dict, stated: Statement, values: list[object], config: ToolSchemaConfig
) -> list[object]:
    """Examples the rule accepts: the tool's own, then successful values, then samples of a
    stated layout; one made from the rule only when there is none of those."""
    if not rule:
        return []
    check = validator(rule)
    kept: dict[str, object] = {}
    for candidate in (*stated.examples, *values, *stated.samples):
        if check.is_valid(candidate):
            kept.setdefault(json.dumps(candidate, sort_keys=True), candidate)
    made = example_of(rule)
    return list(kept.values())[: config.max_examples] or ([made] if made is not None else [])


def _built(reading: _Reading, rule: dict, examples: list[object]) -> dict:
    if not rule:
        return reading.schema
    sentence = rule_text(reading.model_name, rule, examples[0] if examples else None)
    return with_rule(reading.schema, reading.model_name, rule, examples, sentence)


def _proven(before: CallValidation, trial: _Trial) -> bool:
    """Successes kept, some failure newly rejected, and the tool's words borne out."""
    after = trial.after
    keeps = before.accepted_successes <= after.accepted_successes
    newly = after.rejected_failures - before.rejected_failures
    return keeps and bool(newly) and trial.judged.separates


def _edit(
    target: Target,
    reading: _Reading,
    trial: _Trial,
    before: CallValidation,
    successes: list[RecordedCall],
    given: int,
) -> Edit:
    rule, examples = trial.rule, trial.examples
    example = examples[0] if examples else None
    told = sum(statement.says_anything for statement in reading.statements)
    if reading.source == "description":
        told = len(reading.statements)
    return Edit(
        rule=rule,
        schema=trial.schema,
        argument_map=reading.argument_map,
        model_name=reading.model_name,
        renamed=reading.tool_rename[1] if reading.tool_rename else reading.renamed,
        sentence=rule_text(reading.model_name, rule, example) if rule else None,
        after=trial.after,
        learned_from=_learned_from(reading.source, told, given),
        replay=_replay_text(trial, before, len(successes), len(reading.statements)),
        changes=_changes(target, reading),
        evidence={
            "rule_source": reading.source,
            "error_messages": told,
            "refused_said_wrong": trial.judged.said_wrong,
            "refused_said_wrong_rejected": trial.judged.rejected,
            "refused_unexplained": trial.judged.unexplained,
            "error_examples": list(reading.stated.examples),
            "error_examples_accepted": trial.judged.examples_accepted,
            "stated_values": trial.judged.allowed,
            "stated_values_accepted": trial.judged.allowed_accepted,
            "renamed_by_tool": list(reading.tool_rename) if reading.tool_rename else None,
            "required_by_tool": reading.required,
        },
    )


def _learned_from(source: str, told: int, given: int) -> str:
    if source == "description":
        words = f"the tool's description (its {told} error messages say nothing of the value)"
    else:
        words = f"{told} error messages"
    return words + (f" and {given} successful calls" if given else "")


def _replay_text(trial: _Trial, before: CallValidation, successes: int, failures: int) -> str:
    judged, after = trial.judged, trial.after
    text = (
        f"{judged.rejected} of {judged.said_wrong} refused calls the tool's words call wrong "
        f"violate the new schema; {judged.examples_accepted} of {judged.examples} examples "
        f"the tool gave and {judged.allowed_accepted} of {judged.allowed} values its words "
        f"allow validate; {after.successes_valid} of {successes} successful calls "
        f"validate; {after.failures_rejected} of {failures} failing calls violate the new "
        f"schema ({before.failures_rejected} already violated the offered one)"
    )
    if judged.unexplained:
        text += f"; the tool's words do not explain {judged.unexplained} refused calls"
    return text


def _changes(target: Target, reading: _Reading) -> list[str]:
    where = f"{target.tool}.{target.parameter}"
    changes = []
    if reading.tool_rename:
        old, new = reading.tool_rename
        changes.append(
            f"{where}: shown to the model as {new}, the name the tool requires (it refuses "
            f"{old}); no argument map, so the agent passes {new} on to the tool"
        )
    if reading.required:
        changes.append(f"{where}: required, as the tool says")
    return changes


# -- why nothing was proposed -----------------------------------------------------------


def _unknown_parameter(target: Target, tool: OfferedTool, evidence: Statement) -> str:
    if target.parameter in evidence.missing:
        return (
            f"the tool requires {target.parameter}, which the schema of {target.tool} lacks, "
            "and no refusal names the argument it replaces"
        )
    return f"the schema of {target.tool} has no parameter {tool.model_name(target.parameter)}"


def _nothing_stated(target: Target, reading: _Reading, given: int, config: ToolSchemaConfig) -> str:
    where = f"{target.tool}.{target.parameter}"
    if target.parameter in merged(reading.statements).unknown:
        return f"the tool refuses {where} as an unknown parameter and names none to use instead"
    if reading.stated.states_a_rule:
        return (
            f"what the tool says of {where} gives no rule a validator can check "
            f"(examples {list(reading.stated.examples)} share no shape)"
        )
    return (
        f"only {given} successful calls of {target.tool} gave {target.parameter} "
        f"(< {config.min_successes}), and its {len(reading.statements)} refusals and its "
        "description state no rule for it (no pattern, closed set, example, layout, format "
        "or type); nothing to learn its format from"
    )


def _no_separating_rule(
    target: Target, reading: _Reading, values: list[object], simulator: RefusalSimulator
) -> str:
    stated = reading.stated
    source = "the tool's description" if reading.source == "description" else "its refusals"
    reason = (
        f"no rule read from {source} of {target.tool}.{target.parameter} rejects the "
        f"{len(simulator.said_wrong)} refused calls the tool's words call wrong while "
        f"accepting the {len(stated.examples)} examples it gave, the {len(simulator.allowed)} "
        f"values its words allow and the {len(values)} successful values"
    )
    if len(stated.patterns) > 1 or len(stated.enums) > 1:
        return reason + f" (its words contradict each other: {_said(stated)})"
    if _successes_break(stated, values):
        return reason + " (successful values break what the tool says)"
    if not simulator.said_wrong:
        return (
            reason
            + " (no refused value breaks what the tool says: it refused them for another reason)"
        )
    return reason


def _successes_break(stated: Statement, values: list[object]) -> bool:
    return any(not validator(claim).is_valid(v) for claim in claims(stated) for v in values)


def _said(stated: Statement) -> str:
    kinds = [("patterns", stated.patterns), ("closed sets", stated.enums)]
    return "; ".join(
        f"{len(items)} {kind}: "
        + ", ".join(json.dumps(list(i) if isinstance(i, tuple) else i) for i in items)
        for kind, items in kinds
        if len(items) > 1
    )
