"""One record per tool call: the window's analysis and the tool-schema operator count the
same calls, and the record with the most evidence stands for a call reported twice."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from evolution.analysis.tool_errors import distinct_tool_calls, tool_failed
from registry import ToolCallRecord

TRAJECTORIES = [uuid.UUID(int=i) for i in range(1, 3)]


@st.composite
def records(draw) -> ToolCallRecord:
    success = draw(st.sampled_from([True, False, None]))
    error = draw(st.sampled_from([None, "validation_error"])) if success is not True else None
    return ToolCallRecord(
        event_id=uuid.uuid4(),
        trajectory_id=draw(st.sampled_from(TRAJECTORIES)),
        call_id=draw(st.sampled_from(["", "agent-reported", "call_1", "call_2"])),
        tool="lookup",
        arguments="{}",
        success=success,
        error_class=error,
        error_message=draw(st.sampled_from([None, "bad date"])) if error else None,
    )


def key(record: ToolCallRecord) -> tuple:
    anonymous = record.call_id in ("", "agent-reported", "unknown")
    return (record.event_id,) if anonymous else (record.trajectory_id, record.call_id)


@given(st.lists(records(), max_size=12))
def test_each_call_once_with_its_most_telling_record(found: list[ToolCallRecord]) -> None:
    kept = distinct_tool_calls(found)
    assert len({key(r) for r in kept}) == len(kept) == len({key(r) for r in found})
    for record in kept:
        same = [r for r in found if key(r) == key(record)]
        assert tool_failed(record) == any(tool_failed(r) for r in same)
        if tool_failed(record):
            assert (record.error_message is not None) == any(
                tool_failed(r) and r.error_message is not None for r in same
            )
