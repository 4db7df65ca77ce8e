"""The tool-schema operator: schema edits read from what a tool's refusals and description
say it wants or, when they state no rule that replay proves, learned from its successful
calls; proven by replaying its recorded calls against the offered and the candidate schema."""

from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.operator import propose_tool_schema, schema_target
from evolution.tool_schema.rules import infer_pattern, infer_rules

__all__ = [
    "ToolSchemaConfig",
    "infer_pattern",
    "infer_rules",
    "propose_tool_schema",
    "schema_target",
]
