"""A tool's recorded calls in a window, and the schema the window's llm calls offered it
(read by `activities.operators.tool_schema`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from evolution.analysis import error_class_name, tool_parameter
from evolution.analysis.tool_errors import distinct_tool_calls, tool_failed
from registry import ToolCallRecord

__all__ = [
    "RecordedCall",
    "RecordedTool",
    "in_cluster",
    "offered_spec",
    "recorded_calls",
    "recorded_tool",
    "split_calls",
]


@dataclass(frozen=True)
class RecordedCall:
    """One recorded call of the tool, with its arguments parsed (None when not an object)."""

    record: ToolCallRecord
    arguments: dict | None

    @property
    def failed(self) -> bool:
        return tool_failed(self.record)


@dataclass(frozen=True)
class RecordedTool:
    """A tool as a window recorded it: its calls, and the spec the llm calls offered."""

    calls: list[RecordedCall]
    offered: dict | None


def recorded_tool(
    records: Iterable[ToolCallRecord], offered: Iterable[list[dict]], tool: str
) -> RecordedTool:
    """The tool-schema operator's evidence: what a window holds about `tool`, from its tool
    calls (`registry.tool_call_records`) and the tools each llm call offered
    (`registry.offered_tool_lists`)."""
    return RecordedTool(recorded_calls(records, tool), offered_spec(offered, tool))


def recorded_calls(records: Iterable[ToolCallRecord], tool: str) -> list[RecordedCall]:
    """The tool's calls, once each, as the window's analysis counts them
    (`distinct_tool_calls`)."""
    calls = (r for r in records if r.tool == tool)
    return [RecordedCall(r, _parse(r.arguments)) for r in distinct_tool_calls(calls)]


def _parse(arguments: str) -> dict | None:
    try:
        parsed = json.loads(arguments) if arguments else {}
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def in_cluster(call: RecordedCall, parameter: str, error_class: str | None) -> bool:
    """The same test `evolution.analysis` clusters by: error class and named parameter."""
    record = call.record
    found = error_class_name(record.error_class) if record.error_class else "failed"
    return (error_class is None or found == error_class) and tool_parameter(record) == parameter


def split_calls(
    calls: list[RecordedCall], parameter: str, error_class: str | None
) -> tuple[list[RecordedCall], list[RecordedCall]]:
    """Calls known to have worked, and the failures in the cluster of `parameter`, `error_class`.

    A call whose outcome was never reported (success None) teaches nothing either way.
    """
    successes = [c for c in calls if c.record.success is True and not c.failed]
    failures = [c for c in calls if c.failed and in_cluster(c, parameter, error_class)]
    return successes, failures


def offered_spec(offered: Iterable[list[dict]], tool: str) -> dict | None:
    """The tool as the window's llm calls offered it (the most frequent form), or None."""
    seen: Counter[str] = Counter()
    for specs in offered:
        for item in specs:
            if item.get("name") == tool and item.get("parameters"):
                seen[json.dumps(item, sort_keys=True)] += 1
    if not seen:
        return None
    best = min(seen.items(), key=lambda pair: (-pair[1], pair[0]))[0]
    return json.loads(best)
