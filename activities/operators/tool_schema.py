"""The tool-schema operator as the build activity runs it: the window's calls of the
decision's tool and the spec it was offered, read from the registry, then
`evolution.tool_schema.propose_tool_schema`."""

from __future__ import annotations

from functools import partial

from activities.operators.operator import Operator
from evolution.decision import DecisionRecord
from evolution.tool_schema import ToolSchemaConfig, propose_tool_schema, schema_target
from evolution.tool_schema.calls import RecordedTool, recorded_tool
from evolution.window import WindowSpec, trajectory_window
from registry import AgentVersion, Session, offered_tool_lists, tool_call_records

__all__ = ["read_tool_schema", "tool_schema_operator"]


def read_tool_schema(
    session: Session, parent: AgentVersion, decision: DecisionRecord, window: WindowSpec
) -> RecordedTool:
    """The evidence: the window's calls of the decision's tool and the spec it was offered."""
    traffic, tool = trajectory_window(window), schema_target(decision).tool
    calls, offered = tool_call_records(session, traffic), offered_tool_lists(session, traffic)
    return recorded_tool(calls, offered, tool)


def tool_schema_operator(config: ToolSchemaConfig | None = None) -> Operator:
    """The tool-schema operator, `config` bound (default: `ToolSchemaConfig()`)."""
    return Operator(read=read_tool_schema, propose=partial(propose_tool_schema, config=config))
