"""The tool-schema operator: learn what one parameter's values must look like, and say so.

A TOOL_ARGUMENT cluster says the model keeps calling a tool with a value the tool refuses.
The operator reads what the tool's refusals and its description say it wants
(`evolution.tool_schema.refusals`): the tool's own words state the whole rule, and a break
that refuses every call, when the fix matters most, leaves nothing else to learn from.
When they say nothing a replay can prove, it learns the rule from the values of enough
successful calls (`evolution.tool_schema.successes`). Either way
the rule (an enum, a pattern, a format, a type) goes into the model-facing schema with
examples and a description that states it; a parameter may be renamed for the model.

Each edit is proven on the window's recorded calls (`evolution.tool_schema.validation`,
the "replay" of its evidence): they are validated (JSON Schema 2020-12) against the schema
the model was offered and against the candidate. The gateway applies the result
(`runtime.version.overlays`). The evidence, `RecordedTool`, is read by
`activities.operators.tool_schema`.
"""

from __future__ import annotations

from atdp import ToolOverride
from evolution.decision import DecisionRecord
from evolution.operators import Candidate, OperatorError
from evolution.tool_schema.calls import RecordedTool, split_calls
from evolution.tool_schema.candidate import schema_candidate
from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.edits import OfferedTool, Target
from evolution.tool_schema.refusals import edit_from_refusals
from evolution.tool_schema.successes import edit_from_successes
from evolution.tool_schema.validation import validate_calls
from evolution.window import FailureKind
from registry import AgentVersion

__all__ = ["propose_tool_schema", "schema_target"]


def propose_tool_schema(
    recorded: RecordedTool,
    parent: AgentVersion,
    decision: DecisionRecord,
    *,
    config: ToolSchemaConfig | None = None,
) -> Candidate:
    """A candidate whose schema for the cluster's tool states what its parameter must be.

    The rule is what the tool's refusals and description say, when they say one that
    replay proves; else it is learned from the successful calls, when at least
    `config.min_successes` gave the parameter.

    Raises:
        OperatorError: no recorded schema, or no rule that replay proves separates the
            cluster's failures from the successes (too little evidence, no shared shape,
            refusals that state nothing or contradict each other).
    """
    config = config or ToolSchemaConfig()
    target = schema_target(decision)
    successes, failures = split_calls(recorded.calls, target.parameter, target.error_class)
    tool = _offered_tool(recorded.offered, parent, target)
    before = validate_calls(
        tool.offered_schema, dict(tool.override.argument_map), successes, failures
    )
    given = [c for c in successes if target.parameter in (c.arguments or {})]
    try:
        # The tool's own words first: its refusals state the whole rule (every value of a
        # closed set), where successes show only the values users happened to need.
        edit = edit_from_refusals(tool, target, successes, failures, before, config)
    except OperatorError:
        if len(given) < config.min_successes:
            raise
        edit = edit_from_successes(tool, target, successes, failures, before, config)
    return schema_candidate(parent.spec, tool, target, edit, successes, failures, before)


def schema_target(decision: DecisionRecord) -> Target:
    """The tool parameter (and error class) the decision's cluster says to constrain.

    Raises:
        OperatorError: the decision targets no tool_argument cluster naming a parameter.
    """
    cluster = decision.target
    if cluster is None or cluster.kind is not FailureKind.TOOL_ARGUMENT:
        raise OperatorError("the tool-schema operator needs a tool_argument failure cluster")
    if not cluster.tool or not cluster.parameter:
        raise OperatorError(f"cluster '{cluster.key}' names no tool parameter to constrain")
    return Target(cluster.tool, cluster.parameter, cluster.error_class)


def _offered_tool(offered: dict | None, parent: AgentVersion, target: Target) -> OfferedTool:
    offered = offered or {}
    override = parent.spec.tools.tools.get(target.tool, ToolOverride())
    schema = override.parameters or offered.get("parameters")
    if not schema:
        raise OperatorError(f"the window never offered {target.tool} with a parameter schema")
    return OfferedTool(
        override=override,
        schema=schema,
        offered_schema=offered.get("parameters") or schema,
        description=override.description or offered.get("description"),
    )
