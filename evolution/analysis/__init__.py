"""Measure a window of traffic: the `WindowStats` every evolution decision reads.

Plain functions over a window's records (`WindowRecords`, read by
`activities.evidence.read_window` through `registry.windows`): counts and costs are summed
in SQL, the rest (effective rewards, failure clustering, drift) is read here from light
records.
Only user traffic counts; canary and regression compare versions within that traffic.
Rewards are combined only by `registry.effective_reward`, and intervals come from
`evolution.stats`, so a decision and a gate computed from the same data agree.
"""

from evolution.analysis.drift import jensen_shannon
from evolution.analysis.measure import measure_window
from evolution.analysis.records import WindowRecords
from evolution.analysis.tool_errors import ARGUMENT_ERRORS, ROUTING_ERRORS, error_class_name
from evolution.analysis.tool_parameter import tool_parameter
from evolution.analysis.trajectories import tool_setup

__all__ = [
    "ARGUMENT_ERRORS",
    "ROUTING_ERRORS",
    "WindowRecords",
    "error_class_name",
    "jensen_shannon",
    "measure_window",
    "tool_parameter",
    "tool_setup",
]
