"""The candidate a schema edit makes: the parent's spec with the edited tool override, and
what changed, in words and as evidence."""

from __future__ import annotations

import json

from atdp import ToolOverride, VersionSpec
from evolution.operators import Candidate
from evolution.tool_schema.calls import RecordedCall
from evolution.tool_schema.edits import Edit, OfferedTool, Target, appended
from evolution.tool_schema.validation import CallValidation

__all__ = ["schema_candidate"]


def schema_candidate(
    parent: VersionSpec,
    tool: OfferedTool,
    target: Target,
    edit: Edit,
    successes: list[RecordedCall],
    failures: list[RecordedCall],
    before: CallValidation,
) -> Candidate:
    """`parent` with `edit` written into the target tool's override, described."""
    spec = _with_override(parent, target.tool, _edited_override(tool, edit))
    where = f"{target.tool}.{target.parameter}"
    after = edit.after
    newly = len(after.rejected_failures - before.rejected_failures)
    changes = [f"{where}: {_keywords(edit.rule)} learned from {edit.learned_from}"]
    if edit.rule:
        changes.append(f"{where}: description states the rule with an example")
    if edit.renamed and edit.argument_map.get(edit.renamed) == target.parameter:
        changes.append(
            f"{where}: shown to the model as {edit.renamed} (argument_map {edit.renamed} -> "
            f"{target.parameter})"
        )
    changes += [*edit.changes, f"replay: {edit.replay}"]
    evidence = {
        "tool": target.tool,
        "parameter": target.parameter,
        "model_parameter": edit.model_name,
        "error_class": target.error_class,
        "rule": edit.rule,
        "renamed": edit.renamed,
        "learned_from": edit.learned_from,
        "successful_calls": len(successes),
        "failing_calls": len(failures),
        "successes_valid_offered": before.successes_valid,
        "successes_valid_candidate": after.successes_valid,
        "failures_rejected_offered": before.failures_rejected,
        "failures_rejected_candidate": after.failures_rejected,
        "failures_newly_rejected": newly,
        "success_event_ids": [str(c.record.event_id) for c in successes[:5]],
        "failure_event_ids": [str(c.record.event_id) for c in failures[:5]],
        "replay": edit.replay,
        **edit.evidence,
    }
    summary = (
        f"tool schema {where}: {_keywords(edit.rule)} (from {edit.learned_from}); {newly} of "
        f"{len(failures)} recorded failures now caught, {after.successes_valid} of "
        f"{len(successes)} successes valid"
    )
    return Candidate(spec=spec, summary=summary, changes=changes, evidence=evidence)


def _edited_override(tool: OfferedTool, edit: Edit) -> ToolOverride:
    return ToolOverride(
        description=appended(tool.description, edit.sentence)
        if edit.sentence
        else tool.description,
        parameters=edit.schema,
        argument_map=edit.argument_map,
    )


def _with_override(spec: VersionSpec, tool: str, override: ToolOverride) -> VersionSpec:
    """A new spec with `tool`'s override replaced; the parent's spec is never touched."""
    tools = {**spec.tools.tools, tool: override}
    dumped = spec.model_dump(mode="json")
    dumped["tools"] = {"tools": {name: o.model_dump(mode="json") for name, o in tools.items()}}
    return VersionSpec.model_validate(dumped)


def _keywords(rule: dict) -> str:
    if not rule:
        return "no value rule"
    return ", ".join(f"{key} {json.dumps(value)}" for key, value in sorted(rule.items()))
