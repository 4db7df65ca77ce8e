"""Failure clusters: tool errors, users' corrections and feedback, grouped by cause."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from atdp import Reward, RewardSource
from evolution.analysis.tool_errors import (
    error_class_name,
    error_text,
    tool_failed,
    tool_failure_kind,
)
from evolution.analysis.tool_parameter import tool_parameter
from evolution.analysis.trajectories import task_type
from evolution.corrections import (
    CorrectionKind,
    UserCorrection,
    category_kind,
    correction_groups,
)
from evolution.window import FailureCluster, FailureKind
from registry import ToolCallRecord, WindowTrajectory

__all__ = ["failure_clusters"]

_EXAMPLES = 5
_EXAMPLE_CHARS = 200


@dataclass(frozen=True)
class _Failure:
    """One piece of failure evidence, before clustering."""

    kind: FailureKind
    key: str
    trajectory_id: uuid.UUID
    event_id: uuid.UUID | None
    text: str | None = None
    tool: str | None = None
    parameter: str | None = None
    error_class: str | None = None


def failure_clusters(
    trajectories: Sequence[WindowTrajectory],
    setups: Mapping[uuid.UUID, str],
    tool_calls: Sequence[ToolCallRecord],
    rewards: Mapping[uuid.UUID, list[Reward]],
    corrections: Sequence[UserCorrection],
) -> list[FailureCluster]:
    evidence = [
        *(_tool_failure(call) for call in tool_calls if tool_failed(call)),
        *_correction_failures(corrections),
        *_category_failures(rewards, corrections),
    ]
    by_id = {t.id: t for t in trajectories}
    groups: dict[tuple[FailureKind, str], list[_Failure]] = defaultdict(list)
    for failure in evidence:
        groups[(failure.kind, failure.key)].append(failure)
    clusters = [_cluster(items, by_id, setups) for items in groups.values()]
    clusters.sort(key=lambda c: (-c.count, -c.trajectories, c.kind.value, c.key))
    return clusters


def _cluster(
    failures: Sequence[_Failure],
    trajectories: Mapping[uuid.UUID, WindowTrajectory],
    setups: Mapping[uuid.UUID, str],
) -> FailureCluster:
    first = failures[0]
    ids = {f.trajectory_id for f in failures}
    members = [trajectories[i] for i in ids]
    return FailureCluster(
        kind=first.kind,
        key=first.key,
        tool=first.tool,
        parameter=first.parameter,
        error_class=first.error_class,
        count=len(failures),
        trajectories=len(ids),
        share=min(1.0, len(ids) / len(trajectories)),
        tenants=sorted({t.tenant for t in members}),
        task_types=sorted({task_type(t) for t in members}),
        tool_setups=sorted({setups[i] for i in ids}),
        example_event_ids=list(dict.fromkeys(f.event_id for f in failures if f.event_id))[
            :_EXAMPLES
        ],
        examples=list(dict.fromkeys(_short(f.text) for f in failures if f.text))[:_EXAMPLES],
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"


def _tool_failure(call: ToolCallRecord) -> _Failure:
    error_class = error_class_name(call.error_class) if call.error_class else "failed"
    text = error_text(call)
    kind = tool_failure_kind(error_class, text)
    parameter = tool_parameter(call) if kind is FailureKind.TOOL_ARGUMENT else None
    where = f"{call.tool}.{parameter}" if parameter else call.tool
    return _Failure(
        kind=kind,
        key=f"{where}:{error_class}",
        trajectory_id=call.trajectory_id,
        event_id=call.event_id,
        text=text,
        tool=call.tool,
        parameter=parameter,
        error_class=error_class,
    )


# Where each kind of correction points.
_CORRECTION_FAILURES = {
    CorrectionKind.MISSING_FACT: FailureKind.MISSING_FACT,
    CorrectionKind.INSTRUCTION: FailureKind.INSTRUCTION,
    CorrectionKind.TOOL_USE: FailureKind.TOOL_ROUTING,
    CorrectionKind.OTHER: FailureKind.TASK,
}


def _correction_failures(corrections: Sequence[UserCorrection]) -> list[_Failure]:
    """What users said was wrong, one failure per correction, keyed by the group of
    corrections that mean the same (`evolution.corrections`)."""
    return [
        _Failure(
            kind=_CORRECTION_FAILURES[group.kind],
            key=group.key,
            trajectory_id=correction.trajectory_id,
            event_id=correction.event_id,
            text=correction.text,
        )
        for group in correction_groups(corrections)
        for correction in group.members
    ]


def _category_failures(
    rewards: Mapping[uuid.UUID, list[Reward]], corrections: Sequence[UserCorrection]
) -> list[_Failure]:
    """Feedback that names a category without saying more (a "wrong tool" button, say).

    One report becomes several rewards with one target and time; a report whose words
    became a correction is counted there.
    """
    worded = {(c.trajectory_id, c.answer, c.at) for c in corrections}
    failures = []
    for report in _reports(rewards):
        first = report[0]
        if (first.trajectory_id, first.event_id, first.created_at) in worded:
            continue
        for reward in report:
            if reward.value.kind != "categorical":
                continue
            found = _category_failure(error_class_name(reward.value.value), reward.numeric)
            if found is not None:
                kind, key = found
                failures.append(_Failure(kind, key, first.trajectory_id, first.event_id))
    return failures


def _reports(rewards: Mapping[uuid.UUID, list[Reward]]) -> list[list[Reward]]:
    reports: dict[tuple, list[Reward]] = defaultdict(list)
    for items in rewards.values():
        for reward in items:
            if reward.source is RewardSource.EXPLICIT:
                reports[(reward.trajectory_id, reward.event_id, reward.created_at)].append(reward)
    return list(reports.values())


_CATEGORY_FAILURES = {
    CorrectionKind.MISSING_FACT: FailureKind.MISSING_FACT,
    CorrectionKind.INSTRUCTION: FailureKind.INSTRUCTION,
    CorrectionKind.TOOL_USE: FailureKind.TOOL_ROUTING,
}


def _category_failure(category: str, score: float | None) -> tuple[FailureKind, str] | None:
    """(kind, key) of a feedback category; None if it names no failure."""
    kind = category_kind(category)
    if kind in _CATEGORY_FAILURES:
        return _CATEGORY_FAILURES[kind], category
    if score is not None and score < 0.5:
        return FailureKind.TASK, category
    return None  # a category with no known meaning and no low score is not a failure
