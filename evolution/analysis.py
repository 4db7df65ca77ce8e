"""Measure a window of traffic: the `WindowStats` every evolution decision reads.

Plain functions over `registry.windows` queries: counts and costs are summed in SQL, the
rest (effective rewards, failure clustering, drift) is read in Python from light records.
Only user traffic counts; canary and regression compare versions within that traffic.
Rewards are combined only by `registry.effective_reward`, and intervals come from
`evolution.stats`, so a decision and a gate computed from the same data agree.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from atdp import EventKind, OutcomeStatus, Reward, RewardSource, utcnow
from evolution.corrections import (
    CorrectionJudge,
    CorrectionKind,
    UserCorrection,
    category_kind,
    correction_groups,
    read_corrections,
)
from evolution.stats import mean_interval, wilson_interval
from evolution.window import (
    CanaryDelta,
    Drift,
    FailureCluster,
    FailureKind,
    Mean,
    Rate,
    Regression,
    RegressionDesign,
    WindowSpec,
    WindowStats,
    trajectory_window,
)
from registry import (
    Alias,
    AliasMove,
    AliasState,
    LlmUsage,
    Session,
    ToolCallRecord,
    TrajectoryWindow,
    UserTurn,
    WindowTrajectory,
    alias_history,
    aliases_at,
    effective_reward,
    event_kinds,
    follow_up_turns,
    get_agent,
    llm_usage,
    offered_tools,
    task_type_counts,
    tool_call_records,
    window_rewards,
    window_trajectories,
)

__all__ = [
    "ARGUMENT_ERRORS",
    "ROUTING_ERRORS",
    "WindowRecords",
    "analyse_window",
    "error_class_name",
    "jensen_shannon",
    "measure_window",
    "read_window",
    "tool_parameter",
    "tool_setup",
    "topic",
]

# Error classes that say the tool refused the arguments it was given (shape, type, value,
# a missing field): the model called the right tool wrongly, which a clearer tool schema or
# harness can fix. Runtime failures (timeouts, outages, not-found records) are not here.
ARGUMENT_ERRORS = frozenset(
    {
        "bad_format",
        "format_error",
        "invalid_argument",
        "invalid_arguments",
        "invalid_input",
        "invalid_parameter",
        "invalid_params",
        "json_decode_error",
        "missing_argument",
        "missing_field",
        "missing_parameter",
        "schema_error",
        "type_error",
        "validation_error",
        "value_error",
    }
)
# Error classes that say the call should not have gone to this tool at all.
ROUTING_ERRORS = frozenset(
    {
        "blocked_tool",
        "forbidden_tool",
        "invalid_tool",
        "no_such_tool",
        "tool_blocked",
        "tool_not_allowed",
        "tool_not_found",
        "unknown_tool",
        "unsupported_tool",
        "wrong_tool",
    }
)
# Implicit next-turn rewards (proxy.signals) that say the user corrected or regenerated an
# answer, and the explicit feedback field that does the same.
_IMPLICIT_CORRECTION = "user_accepted"
_EXPLICIT_CORRECTION = "correction"
_TASK_SUCCESS = "task_success"
_FAILED_STATUSES = frozenset(
    {OutcomeStatus.FAILURE.value, OutcomeStatus.ERROR.value, OutcomeStatus.ABANDONED.value}
)
# Tool call ids that do not identify one call (/v1/events' default, an unmatched result).
_ANONYMOUS_CALLS = frozenset({"", "agent-reported", "unknown"})
_EXAMPLES = 5
_EXAMPLE_CHARS = 200
_GROWN = 3
_TOPIC_TERMS = 3


@dataclass(frozen=True)
class WindowRecords:
    """What a window's statistics are measured from, read in one go (`read_window`).

    The version comparisons (drift, canary, regression) are read whole; the rest are the
    window's light records, measured by `measure_window`.
    """

    spec: WindowSpec
    since: datetime
    until: datetime
    stable_version: str | None
    trajectories: list[WindowTrajectory]
    offered: dict[uuid.UUID, set[str]]
    rewards: list[Reward]
    usage: dict[uuid.UUID, LlmUsage]
    tool_calls: list[ToolCallRecord]
    corrected: dict[uuid.UUID, uuid.UUID]
    turns: list[UserTurn]
    drift: Drift | None
    canary: CanaryDelta | None
    regression: Regression | None


def analyse_window(
    session: Session,
    spec: WindowSpec,
    *,
    now: datetime | None = None,
    judge: CorrectionJudge | None = None,
) -> WindowStats:
    """Measure the window `spec` names, from the registry, as of `now`.

    `judge` reads users' corrections with a model (see `evolution.corrections.judge`);
    without one they are read offline. An activity reads and measures apart, so that no
    transaction waits on the judge.

    Raises:
        registry.NotFoundError: the agent does not exist (a typo is not an empty window).
    """
    return measure_window(read_window(session, spec, now=now), judge=judge)


def read_window(
    session: Session, spec: WindowSpec, *, now: datetime | None = None
) -> WindowRecords:
    """The records of the window `spec` names, as of `now`.

    Raises:
        registry.NotFoundError: the agent does not exist (a typo is not an empty window).
    """
    get_agent(session, spec.agent)
    until = spec.until or now or utcnow()
    window = trajectory_window(spec, until=until)
    holdback = _holdback_at(session, spec.agent, until)
    if spec.version_id is None:
        # The sessions a holdback keeps on the replaced version are a yardstick for the
        # regression check, not the traffic an evolution of stable would change.
        window = window.model_copy(update={"held_back": holdback})
    trajectories = window_trajectories(session, window)
    since = _window_start(spec, trajectories, until)
    rewards = window_rewards(session, window)
    aliases = aliases_at(session, spec.agent, until)
    return WindowRecords(
        spec=spec,
        since=since,
        until=until,
        stable_version=aliases.stable,
        trajectories=trajectories,
        offered=offered_tools(session, window),
        rewards=rewards,
        usage=llm_usage(session, window),
        tool_calls=_distinct_tool_calls(tool_call_records(session, window)),
        corrected=_corrected_calls(session, _by_trajectory(rewards)),
        turns=follow_up_turns(session, window),
        drift=_drift(session, spec, window, trajectories, since, until),
        canary=_canary(session, spec, aliases, since, until),
        regression=_regression(session, spec, until, holdback),
    )


def measure_window(records: WindowRecords, *, judge: CorrectionJudge | None = None) -> WindowStats:
    """The window's statistics from its records; `judge` as in `analyse_window`."""
    trajectories, usage, tool_calls = records.trajectories, records.usage, records.tool_calls
    setups = {t.id: tool_setup(records.offered.get(t.id, ())) for t in trajectories}
    rewards = _by_trajectory(records.rewards)
    corrections = read_corrections(
        trajectories, records.rewards, records.offered, records.turns, judge=judge
    )
    success = _task_success(trajectories, rewards)
    cost = math.fsum(item.cost_usd for item in usage.values())
    llm_calls = sum(item.calls for item in usage.values())
    return WindowStats(
        spec=records.spec,
        since=records.since,
        until=records.until,
        stable_version=records.stable_version,
        trajectories=len(trajectories),
        sessions=len({(t.tenant, t.session) for t in trajectories}),
        llm_calls=llm_calls,
        tool_calls=len(tool_calls),
        tenants=sorted({t.tenant for t in trajectories}),
        task_types=sorted({_task_type(t) for t in trajectories}),
        tool_setups=sorted(set(setups.values())),
        task_success=success,
        reward=_mean(_effective_rewards(trajectories, rewards)),
        correction_rate=_rate(len(records.corrected), llm_calls),
        tool_error_rate=_rate(sum(map(_failed, tool_calls)), len(tool_calls)),
        failures=_failure_clusters(trajectories, setups, tool_calls, rewards, corrections),
        cost_usd=cost,
        cost_per_success=cost / success.successes if success.successes else None,
        drift=records.drift,
        canary=records.canary,
        regression=records.regression,
    )


# --- the window ------------------------------------------------------------------------


def _window_start(
    spec: WindowSpec, trajectories: Sequence[WindowTrajectory], until: datetime
) -> datetime:
    """A time window starts at `since`; a count window at its oldest trajectory."""
    if spec.last is None:
        assert spec.since is not None  # WindowSpec requires since or last
        return spec.since
    if trajectories:
        return min(t.started_at for t in trajectories)
    return spec.since or until


def _by_trajectory(rewards: Iterable[Reward]) -> dict[uuid.UUID, list[Reward]]:
    grouped: dict[uuid.UUID, list[Reward]] = defaultdict(list)
    for reward in rewards:
        grouped[reward.trajectory_id].append(reward)
    return grouped


def _task_type(trajectory: WindowTrajectory) -> str:
    return trajectory.task_type or "unknown"


def tool_setup(names: Iterable[str]) -> str:
    """A short stable fingerprint of a set of tool names; "none" for no tools.

    Spread across tool setups is evidence for a weights change: a failure seen with many
    different tool sets is not about one tool's schema.
    """
    unique = sorted(set(names))
    if not unique:
        return "none"
    return hashlib.sha256("\n".join(unique).encode()).hexdigest()[:12]


# --- rates and means -------------------------------------------------------------------


def _rate(successes: int, total: int) -> Rate:
    low, high = wilson_interval(successes, total)
    return Rate(
        successes=successes,
        total=total,
        rate=successes / total if total else None,
        low=low,
        high=high,
    )


def _mean(values: Sequence[float]) -> Mean:
    measured = mean_interval(values)
    if measured is None:
        return Mean(n=0, mean=None, low=None, high=None)
    mean, low, high = measured
    return Mean(n=len(values), mean=mean, low=low, high=high)


def _succeeded(trajectory: WindowTrajectory, rewards: Sequence[Reward]) -> bool | None:
    """Whether the task succeeded: a `task_success` judgement first, else the outcome status,
    else what the user said of it (scores, thumbs, categories); None without any of them.

    The reward wins because it is the later, more specific evidence (a verifier or the
    agent's own report) and because later judgements supersede earlier ones there. Most
    users never report an outcome, but many rate an answer: that is evidence too.
    """
    judged = effective_reward(rewards, _TASK_SUCCESS)
    if judged is not None:
        return judged.value >= 0.5
    if trajectory.outcome_status == OutcomeStatus.SUCCESS.value:
        return True
    if trajectory.outcome_status in _FAILED_STATUSES:
        return False
    rated = effective_reward([r for r in rewards if r.source is RewardSource.EXPLICIT])
    return rated.value >= 0.5 if rated is not None else None


def _task_success(
    trajectories: Sequence[WindowTrajectory], rewards: Mapping[uuid.UUID, list[Reward]]
) -> Rate:
    known = [_succeeded(t, rewards.get(t.id, [])) for t in trajectories]
    judged = [result for result in known if result is not None]
    return _rate(sum(judged), len(judged))


def _effective_rewards(
    trajectories: Sequence[WindowTrajectory], rewards: Mapping[uuid.UUID, list[Reward]]
) -> list[float]:
    """One effective reward per trajectory that has any."""
    values = [effective_reward(rewards.get(t.id, [])) for t in trajectories]
    return [value.value for value in values if value is not None]


def _failed(call: ToolCallRecord) -> bool:
    return call.success is False or call.error_class is not None


def _distinct_tool_calls(records: Sequence[ToolCallRecord]) -> list[ToolCallRecord]:
    """One record per tool call.

    The gateway records a tool result the agent sends back, and the agent may report the
    same call through /v1/events; with the same call id they are one call, and the record
    with more evidence (a failure, then an error message) stands for it.
    """
    kept: dict[tuple, ToolCallRecord] = {}
    for record in records:
        key: tuple = (
            (record.event_id,)
            if record.call_id in _ANONYMOUS_CALLS
            else (record.trajectory_id, record.call_id)
        )
        held = kept.get(key)
        if held is None or _evidence(record) > _evidence(held):
            kept[key] = record
    return list(kept.values())


def _evidence(call: ToolCallRecord) -> tuple[bool, bool]:
    return _failed(call), call.error_message is not None


def _corrected_calls(
    session: Session, rewards: Mapping[uuid.UUID, list[Reward]]
) -> dict[uuid.UUID, uuid.UUID]:
    """The llm calls a user corrected or regenerated, with their trajectories.

    Implicit next-turn signals (`user_accepted` false) and explicit corrections both count,
    when they name an llm_call event; a correction of a whole trajectory names no call.
    """
    targets = {
        reward.event_id: reward.trajectory_id
        for items in rewards.values()
        for reward in items
        if reward.event_id is not None and _is_correction(reward)
    }
    kinds = event_kinds(session, targets)
    return {
        event_id: trajectory_id
        for event_id, trajectory_id in targets.items()
        if kinds.get(event_id) == EventKind.LLM_CALL.value
    }


def _is_correction(reward: Reward) -> bool:
    if reward.source is RewardSource.IMPLICIT_NEXT_TURN and reward.name == _IMPLICIT_CORRECTION:
        return reward.numeric is not None and reward.numeric < 0.5
    return reward.source is RewardSource.EXPLICIT and reward.name == _EXPLICIT_CORRECTION


# --- failures --------------------------------------------------------------------------


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


def _failure_clusters(
    trajectories: Sequence[WindowTrajectory],
    setups: Mapping[uuid.UUID, str],
    tool_calls: Sequence[ToolCallRecord],
    rewards: Mapping[uuid.UUID, list[Reward]],
    corrections: Sequence[UserCorrection],
) -> list[FailureCluster]:
    evidence = [
        *(_tool_failure(call) for call in tool_calls if _failed(call)),
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
        task_types=sorted({_task_type(t) for t in members}),
        tool_setups=sorted({setups[i] for i in ids}),
        example_event_ids=list(dict.fromkeys(f.event_id for f in failures if f.event_id))[
            :_EXAMPLES
        ],
        examples=list(dict.fromkeys(_short(f.text) for f in failures if f.text))[:_EXAMPLES],
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _EXAMPLE_CHARS else text[: _EXAMPLE_CHARS - 1] + "…"


def error_class_name(error_class: str) -> str:
    """An error class in one spelling: "ValidationError", "validation-error": "validation_error"."""
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", error_class.strip())
    return re.sub(r"[^a-z0-9]+", "_", snake.lower()).strip("_") or "error"


# Generic classes (the gateway's "tool_error" for a result that reads like an error) say
# nothing about the cause, so their message decides.
_ARGUMENT_TEXT = re.compile(
    r"\b(invalid|missing|malformed|must (be|look|match|have|contain|start|end)|should be"
    r"|expected|not a valid|validation|does not match|doesn't match|not one of|one of"
    r"|format|pattern|not permitted|extra (inputs?|fields?|arguments?)"
    r"|(field|parameter|argument|property) (is )?required|required (field|parameter|argument)"
    r"|unexpected (argument|keyword|parameter|field)"
    r"|unknown (argument|keyword|parameter|field|property))\b",
    re.IGNORECASE,
)
_ROUTING_TEXT = re.compile(
    r"\b(unknown|no such|unsupported|blocked|forbidden) (tool|function)\b"
    r"|\b(tool|function)\b[^.]{0,40}\b(not found|does not exist|not allowed|is blocked)\b",
    re.IGNORECASE,
)


def _tool_failure(call: ToolCallRecord) -> _Failure:
    error_class = error_class_name(call.error_class) if call.error_class else "failed"
    text = _error_text(call)
    kind = _tool_failure_kind(error_class, text)
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


def _tool_failure_kind(error_class: str, text: str | None) -> FailureKind:
    if error_class in ROUTING_ERRORS:
        return FailureKind.TOOL_ROUTING
    if error_class in ARGUMENT_ERRORS:
        return FailureKind.TOOL_ARGUMENT
    if text and _ROUTING_TEXT.search(text):
        return FailureKind.TOOL_ROUTING
    if text and _ARGUMENT_TEXT.search(text):
        return FailureKind.TOOL_ARGUMENT
    # A tool that failed for its own reasons (timeout, outage): evidence of a failed task.
    return FailureKind.TASK


def _error_text(call: ToolCallRecord) -> str | None:
    """The failure in words: the error message, else the tool's return as text."""
    if call.error_message:
        return call.error_message
    returned = call.tool_return
    if returned is None:
        return None
    if isinstance(returned, str):
        return returned
    return json.dumps(returned, ensure_ascii=False, sort_keys=True)


_PARAMETER_KEYS = ("parameter", "param", "argument", "field", "property", "loc", "path")
_NESTED_KEYS = ("error", "errors", "detail", "details")
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_.\[\]]*"
_NAMED_PARAMETER = re.compile(
    rf"\b(?:parameter|argument|field|param|property)s?\s+[`'\"]?({_IDENTIFIER})", re.IGNORECASE
)
# "'order_id' is required" names a parameter; "'coach' is not one of [...]" (jsonschema's
# wording) quotes the refused value.
_QUOTED_PARAMETER = re.compile(
    rf"[`'\"]({_IDENTIFIER})[`'\"]\s+(?:is|must|should|was|has)\b(?!\s+not\b)"
)
# "order_id: must be a string"; capitalised heads ("Error:", "Note:") are not parameters.
_PREFIXED_PARAMETER = re.compile(r"^\s*([a-z_][A-Za-z0-9_.\[\]]*)\s*:")
_KNOWN_ERRORS = ARGUMENT_ERRORS | ROUTING_ERRORS
_NOT_PARAMETERS = frozenset(
    {"error", "exception", "traceback", "warning", "invalid", "failed", "failure", "value"}
)


def tool_parameter(call: ToolCallRecord) -> str | None:
    """The argument a tool's error names, if it names one.

    Structured returns first ({"parameter": "order_id"}, {"loc": ["body", "order_id"]}),
    then the error text ("order_id: must be a string", "missing parameter 'order_id'"),
    then any argument of the call that the text mentions.
    """
    for source in (call.tool_return, _json_or_none(call.error_message)):
        found = _structured_parameter(source)
        if found:
            return found
    text = _error_text(call) or ""
    for line in [*_error_strings(call.tool_return), text]:  # the message before its wrapper
        found = _text_parameter(line)
        if found:
            return found
    return _mentioned_argument(call.arguments, text)


def _json_or_none(text: str | None) -> object:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _structured_parameter(value: object, depth: int = 0) -> str | None:
    if depth > 3:
        return None
    if isinstance(value, list):
        return next((p for item in value if (p := _structured_parameter(item, depth + 1))), None)
    if not isinstance(value, dict):
        return None
    for key in _PARAMETER_KEYS:
        found = _parameter_name(value.get(key))
        if found:
            return found
    for key in _NESTED_KEYS:
        found = _structured_parameter(value.get(key), depth + 1)
        if found:
            return found
    return None


def _parameter_name(value: object) -> str | None:
    """A parameter named by a string or a location path (["body", "order_id", 0])."""
    if isinstance(value, list):
        names = [item for item in value if isinstance(item, str)]
        value = names[-1] if names else None
    if isinstance(value, str) and re.fullmatch(_IDENTIFIER, value.strip()):
        return _acceptable(value.strip())
    return None


def _error_strings(value: object) -> list[str]:
    """Error strings inside a structured return ({"error": "order_id: bad"})."""
    if not isinstance(value, dict):
        return []
    return [
        item
        for key in ("error", "message", "detail", "msg")
        if isinstance(item := value.get(key), str)
    ]


def _text_parameter(text: str) -> str | None:
    for pattern in (_PREFIXED_PARAMETER, _NAMED_PARAMETER, _QUOTED_PARAMETER):
        for match in pattern.finditer(text):
            found = _acceptable(match.group(1))
            if found:
                return found
    return None


def _acceptable(name: str) -> str | None:
    """Error words and class names are not parameters ("Error: ...", "ValidationError: ...")."""
    lowered = name.lower()
    if lowered in _NOT_PARAMETERS or "error" in lowered or "exception" in lowered:
        return None
    if error_class_name(name) in _KNOWN_ERRORS:
        return None
    return name


def _mentioned_argument(arguments: str, text: str) -> str | None:
    parsed = _json_or_none(arguments)
    if not isinstance(parsed, dict) or not text:
        return None
    mentioned = [
        (match.start(), key)
        for key in parsed
        if isinstance(key, str) and (match := re.search(rf"\b{re.escape(key)}\b", text))
    ]
    return min(mentioned)[1] if mentioned else None


_WORD = re.compile(r"[a-z][a-z0-9_]*")
_STOPWORDS = frozenset(
    """a about actually again also am an and any are as asked at be been but by can could did
    do does for from had has have he her his how i if in into is it its just me meant my no
    nope not of on only or our please said she should so than that the their them then there
    these they this those to too try us wanted was we were what when where which who why will
    with would wrong incorrect you your yes that's it's isn't don't doesn't""".split()
)


def topic(text: str) -> str:
    """A missing fact's topic: its first few key terms, lowercased and sorted.

    Deliberately simple and deterministic: "No, the refund window is 30 days" and "actually
    the refund window is 30 days for EU orders" both give "days refund window". Numbers are
    dropped (they are the fact, not its topic), and so are stopwords and correction words.
    """
    words = [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _STOPWORDS]
    terms = sorted(dict.fromkeys(words[:_TOPIC_TERMS]))
    return " ".join(terms) or "unspecified"


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


# --- drift -----------------------------------------------------------------------------


def jensen_shannon(p: Mapping[str, float], q: Mapping[str, float]) -> float:
    """The Jensen-Shannon divergence (base 2) of two mixes given as counts or weights.

    Symmetric, 0 for identical mixes, 1 for mixes with nothing in common.
    """
    p_total, q_total = math.fsum(p.values()), math.fsum(q.values())
    if p_total <= 0 or q_total <= 0:
        raise ValueError("jensen_shannon needs two non-empty mixes")
    terms = []
    for key in sorted(set(p) | set(q)):
        a, b = p.get(key, 0.0) / p_total, q.get(key, 0.0) / q_total
        middle = (a + b) / 2.0
        terms.append(_half_kl(a, middle) + _half_kl(b, middle))
    return min(1.0, max(0.0, math.fsum(terms)))


def _half_kl(share: float, middle: float) -> float:
    return 0.5 * share * math.log2(share / middle) if share > 0 else 0.0


def _drift(
    session: Session,
    spec: WindowSpec,
    window: TrajectoryWindow,
    trajectories: Sequence[WindowTrajectory],
    since: datetime,
    until: datetime,
) -> Drift | None:
    """The task-type mix against the window before: same length, or the previous `last`."""
    if spec.last is None:
        previous = window.model_copy(update={"since": since - (until - since), "until": since})
    else:
        previous = window.model_copy(update={"since": None, "skip": len(trajectories)})
    before = {key or "unknown": n for key, n in task_type_counts(session, previous).items()}
    now = Counter(_task_type(t) for t in trajectories)
    if not before or not now:
        return None
    return Drift(
        divergence=jensen_shannon(now, before),
        previous_trajectories=sum(before.values()),
        grown=_grown(now, before),
    )


def _grown(now: Mapping[str, int], before: Mapping[str, int]) -> list[str]:
    now_total, before_total = sum(now.values()), sum(before.values())
    rises = {
        key: now[key] / now_total - before.get(key, 0) / before_total
        for key in now
        if now[key] / now_total > before.get(key, 0) / before_total
    }
    return sorted(rises, key=lambda key: (-rises[key], key))[:_GROWN]


# --- versions: canary and regression ---------------------------------------------------


def _version_rewards(session: Session, window: TrajectoryWindow) -> dict[str | None, list[float]]:
    """Effective reward of each trajectory in the window that has one, by serving version."""
    rewards = _by_trajectory(window_rewards(session, window))
    values: dict[str | None, list[float]] = defaultdict(list)
    for trajectory in window_trajectories(session, window):
        value = effective_reward(rewards.get(trajectory.id, []))
        if value is not None:
            values[trajectory.version_id].append(value.value)
    return values


def _delta(new: Mean, old: Mean) -> float | None:
    return new.mean - old.mean if new.mean is not None and old.mean is not None else None


def _canary(
    session: Session, spec: WindowSpec, aliases: AliasState, since: datetime, until: datetime
) -> CanaryDelta | None:
    """Canary against stable over the window's time span (the version filter aside)."""
    if aliases.canary is None or aliases.stable is None:
        return None
    window = _served_window(spec, (aliases.stable, aliases.canary), since, until)
    values = _version_rewards(session, window)
    stable, canary = _mean(values[aliases.stable]), _mean(values[aliases.canary])
    return CanaryDelta(
        stable_version=aliases.stable,
        canary_version=aliases.canary,
        weight=aliases.canary_weight,
        stable=stable,
        canary=canary,
        delta=_delta(canary, stable),
    )


def _regression(
    session: Session, spec: WindowSpec, until: datetime, holdback: tuple[str, datetime] | None
) -> Regression | None:
    """The current stable since its promotion against its parent.

    On the same traffic when the parent has been held back since the promotion (a share of
    new sessions stays on it): that comparison is immune to drift in what users ask.
    Otherwise the parent just before the promotion, over an equally long period, so a
    weekly rhythm in the traffic weighs on both alike, but a drift that came with the
    promotion weighs on the stable alone. A holdback with too few rewards yet confirms
    nothing; the before/after comparison is not used in its place.

    `holdback`: the holdback running at `until` (`_holdback_at`), if any.
    """
    promotion = _last_promotion(session, spec.agent, until)
    if promotion is None:
        return None
    version_id, parent_id, promoted_at = promotion
    if holdback is not None and holdback[0] == parent_id and holdback[1] >= promoted_at:
        held_since = holdback[1]
        current = _served_mean(session, spec, version_id, held_since, until)
        parent = _served_mean(session, spec, parent_id, held_since, until)
        design = RegressionDesign.HOLDBACK
    else:
        span = until - promoted_at
        current = _served_mean(session, spec, version_id, promoted_at, until)
        parent = _served_mean(session, spec, parent_id, promoted_at - span, promoted_at)
        design = RegressionDesign.BEFORE_AFTER
    return Regression(
        version_id=version_id,
        parent_id=parent_id,
        promoted_at=promoted_at,
        current=current,
        parent=parent,
        delta=_delta(current, parent),
        design=design,
    )


def _holdback_at(session: Session, agent: str, until: datetime) -> tuple[str, datetime] | None:
    """(the held-back version, since when) as of `until`; None if no holdback runs then."""
    found = _latest_pointing(session, agent, Alias.HOLDBACK, until)
    if found is None:
        return None
    moves, start = found
    return moves[start].version_id, moves[start].at


def _last_promotion(
    session: Session, agent: str, until: datetime
) -> tuple[str, str, datetime] | None:
    """(stable, the version it replaced, when) as of `until`; None if it replaced none."""
    found = _latest_pointing(session, agent, Alias.STABLE, until)
    if found is None:
        return None
    moves, start = found
    if start == 0 or moves[start - 1].version_id is None:
        return None
    return moves[start].version_id, moves[start - 1].version_id, moves[start].at


def _latest_pointing(
    session: Session, agent: str, alias: Alias, until: datetime
) -> tuple[list[AliasMove], int] | None:
    """An alias's moves up to `until`, and the index of the first of the trailing moves that
    point where it points at `until` (re-pointing an alias at its version changes nothing);
    None if it points nowhere then."""
    moves = [m for m in alias_history(session, agent, alias) if m.at <= until]
    if not moves or moves[-1].version_id is None:
        return None
    start = len(moves) - 1
    while start > 0 and moves[start - 1].version_id == moves[-1].version_id:
        start -= 1
    return moves, start


def _served_mean(
    session: Session, spec: WindowSpec, version_id: str, since: datetime, until: datetime
) -> Mean:
    if until <= since:
        return _mean([])
    window = _served_window(spec, (version_id,), since, until)
    return _mean(_version_rewards(session, window)[version_id])


def _served_window(
    spec: WindowSpec, version_ids: tuple[str, ...], since: datetime, until: datetime
) -> TrajectoryWindow:
    """The spec's agent and tenants over [since, until), as these versions served them."""
    update = {"version_ids": version_ids, "since": since, "until": until, "last": None}
    return trajectory_window(spec, until=until).model_copy(update=update)
