"""Read-only queries over a window of an agent's user traffic, for the control plane.

A `TrajectoryWindow` names the trajectories (agent, tenants, versions, a time range or the
newest N); each function here reads one thing about them. Counts and sums are taken in SQL,
because llm_call bodies hold whole prompts and are too heavy to load by the thousand;
everything else comes back as light records for the analysis to read in Python.

Only user traffic counts: the gateway records shadow copies in trajectories of their own,
so a trajectory holding any shadow or evaluation event is left out of every window but a
shadow gate's, which reads those copies alone.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.ext.compiler import compiles
from sqlmodel import Session, select

from atdp import Event, EventKind, Reward, Traffic
from registry.bodies import STORED, TOOLS, TOOLS_AT, offered_tools_of
from registry.bodies import events as stored_events
from registry.db import id_chunks
from registry.rewards import _reward
from registry.tables import EventRow, RewardRow, TrajectoryRow

__all__ = [
    "SAMPLE_SPACE",
    "ConversationTurn",
    "LlmUsage",
    "ToolCallRecord",
    "TrajectoryWindow",
    "UserTurn",
    "WindowTrajectory",
    "conversation_turns",
    "count_trajectories",
    "event_kinds",
    "follow_up_turns",
    "in_sample",
    "llm_usage",
    "no_jit",
    "offered_tool_lists",
    "offered_tools",
    "replies",
    "rewarded_events",
    "task_type_counts",
    "tool_call_records",
    "window_events",
    "window_rewards",
    "window_trajectories",
]


# A window may be read as a uniform sample of its trajectories (`TrajectoryWindow.sample`):
# those whose id ends in 4 hex digits below `sample`, of SAMPLE_SPACE. The ids' last bits
# are random (UUIDv7's rand_b), so which trajectories that keeps has nothing to do with
# their time, tenant or content, and every reader of the window keeps the same ones.
SAMPLE_SPACE = 1 << 16


def in_sample(trajectory_id: uuid.UUID, sample: int | None) -> bool:
    """Whether a trajectory is in a window's sample (the SQL predicate, in Python)."""
    if sample is None or sample >= SAMPLE_SPACE:
        return True
    return trajectory_id.hex[-4:] < f"{sample:04x}"


class TrajectoryWindow(BaseModel):
    """Which trajectories: an agent's user traffic, narrowed by tenant, version and time.

    Args:
        tenants, version_ids: None for all.
        held_back: (version, since): leave out that version's trajectories from `since`
            on, the sessions a holdback keeps on it (see `registry.aliases`).
        since, until: started_at in [since, until).
        last: only the newest `last` of those (by started_at, then id), after skipping
            the newest `skip`: the previous count window is `skip=last`.
        traffic: user trajectories hold no shadow or evaluation event; shadow ones hold
            the copies a shadow version served.
        sample: only the trajectories `in_sample` (a uniform sample of about
            sample / SAMPLE_SPACE of them; for time windows: with `last`, the sample is
            taken before the count).
    """

    model_config = ConfigDict(frozen=True)

    agent: str
    tenants: tuple[str, ...] | None = None
    version_ids: tuple[str, ...] | None = None
    held_back: tuple[str, datetime] | None = None
    since: datetime | None = None
    until: datetime | None = None
    last: int | None = Field(default=None, ge=1)
    skip: int = Field(default=0, ge=0)
    traffic: Traffic = Traffic.USER
    sample: int | None = Field(default=None, ge=0, le=SAMPLE_SPACE)


def no_jit(session: Session) -> None:
    """Turn PostgreSQL's JIT compilation off for the rest of the session's transaction.

    A day's window is a few partitions of a large table, so the planner costs each read
    above `jit_above_cost`, yet each finishes in well under a second: compiling it took
    about 0.15 s more (benchmarks/RESULTS.md, window analysis). Nothing to do on SQLite.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(sa.text("SET LOCAL jit = off"))


class _IdTail(sa.sql.functions.FunctionElement):
    """The last 4 hex digits of a UUID column, lower case, on either backend."""

    type = sa.String()
    inherit_cache = True


@compiles(_IdTail, "postgresql")
def _id_tail_postgresql(element, compiler, **kw) -> str:
    return f"right(({compiler.process(element.clauses, **kw)})::text, 4)"


@compiles(_IdTail, "sqlite")
def _id_tail_sqlite(element, compiler, **kw) -> str:  # stored as 32 lower-case hex digits
    return f"lower(substr({compiler.process(element.clauses, **kw)}, -4))"


class WindowTrajectory(BaseModel):
    """The columns of a trajectory that window statistics read."""

    id: uuid.UUID
    tenant: str
    session: str
    task_type: str | None
    version_id: str | None
    started_at: datetime
    outcome_status: str | None


class LlmUsage(BaseModel):
    """A trajectory's llm calls and what they cost."""

    calls: int
    cost_usd: float


class ToolCallRecord(BaseModel):
    """One recorded tool call and its outcome, without the rest of the event."""

    event_id: uuid.UUID
    trajectory_id: uuid.UUID
    call_id: str
    tool: str
    arguments: str
    success: bool | None
    error_class: str | None
    error_message: str | None
    tool_return: Any = None


class UserTurn(BaseModel):
    """A user message that followed an answer in its session (not a session's first)."""

    event_id: uuid.UUID
    trajectory_id: uuid.UUID
    parent_id: uuid.UUID  # the llm call it answers
    created_at: datetime
    text: str | None


class ConversationTurn(BaseModel):
    """A user message, or an answer a user message follows or that answers one: what a
    follow-up is read against (`conversation_turns`)."""

    event_id: uuid.UUID
    trajectory_id: uuid.UUID
    parent_id: uuid.UUID | None
    seq: int
    created_at: datetime
    speaker: str  # "user" or "agent"
    text: str | None


# How much earlier than its trajectory's start an event (or a reward) may be stamped: by
# another gateway whose clock is a little behind. Reads of a window's events and rewards
# bound created_at by the window's start less this, so that on PostgreSQL the planner
# skips the day partitions before the window (registry.partitions).
CLOCK_SKEW = timedelta(hours=1)


def _recorded_since(window: TrajectoryWindow, created_at: Any) -> sa.ColumnElement[bool]:
    """`created_at` (an event's or a reward's) is not before the window can hold."""
    return created_at >= window.since - CLOCK_SKEW if window.since is not None else sa.true()


def _traffic(window: TrajectoryWindow) -> sa.ColumnElement[bool]:
    """User: the trajectory holds no shadow or evaluation event; else it holds one of the
    window's traffic."""
    own = (EventRow.trajectory_id == TrajectoryRow.id, _recorded_since(window, EventRow.created_at))
    if window.traffic is Traffic.USER:
        other = select(EventRow.id).where(*own, EventRow.traffic != Traffic.USER.value)
        return ~other.exists()
    return select(EventRow.id).where(*own, EventRow.traffic == window.traffic.value).exists()


def _select_window_trajectories(window: TrajectoryWindow) -> sa.Select:
    """The window's trajectories as `WindowTrajectory` rows (its fields, in order)."""
    return _select(
        window,
        TrajectoryRow.id,
        TrajectoryRow.tenant,
        TrajectoryRow.session,
        TrajectoryRow.task_type,
        TrajectoryRow.version_id,
        TrajectoryRow.started_at,
        TrajectoryRow.outcome_status,
    )


def _select(window: TrajectoryWindow, *columns: Any) -> sa.Select:
    where = (TrajectoryRow.agent == window.agent, _traffic(window))
    statement = select(*columns).where(*where)
    if window.tenants is not None:
        statement = statement.where(TrajectoryRow.tenant.in_(window.tenants))
    if window.version_ids is not None:
        statement = statement.where(TrajectoryRow.version_id.in_(window.version_ids))
    if window.held_back is not None:
        version_id, since = window.held_back
        statement = statement.where(
            ~sa.and_(TrajectoryRow.version_id == version_id, TrajectoryRow.started_at >= since)
        )
    if window.since is not None:
        statement = statement.where(TrajectoryRow.started_at >= window.since)
    if window.sample is not None and window.sample < SAMPLE_SPACE:
        statement = statement.where(_IdTail(TrajectoryRow.id) < f"{window.sample:04x}")
    if window.until is not None:
        statement = statement.where(TrajectoryRow.started_at < window.until)
    if window.last is not None:
        statement = (
            statement.order_by(TrajectoryRow.started_at.desc(), TrajectoryRow.id.desc())
            .offset(window.skip)
            .limit(window.last)
        )
    return statement


def _ids(window: TrajectoryWindow) -> sa.Select:
    """The window's trajectory ids, as a subquery for `IN`."""
    return _select(window, TrajectoryRow.id)


def _window_events(window: TrajectoryWindow, kind: EventKind, *columns: Any) -> sa.Select:
    return select(*columns).where(
        EventRow.trajectory_id.in_(_ids(window)),
        EventRow.kind == kind.value,
        EventRow.traffic == window.traffic.value,
        _recorded_since(window, EventRow.created_at),
    )


def window_trajectories(session: Session, window: TrajectoryWindow) -> list[WindowTrajectory]:
    """The window's trajectories, newest first."""
    statement = _select_window_trajectories(window)
    if window.last is None:
        statement = statement.order_by(TrajectoryRow.started_at.desc(), TrajectoryRow.id.desc())
    return [WindowTrajectory(**row._mapping) for row in session.execute(statement)]


def count_trajectories(session: Session, window: TrajectoryWindow) -> int:
    """How many trajectories the window holds, counted by the database."""
    inner = _select(window, TrajectoryRow.id).subquery()
    return session.execute(select(sa.func.count()).select_from(inner)).scalar_one()


def task_type_counts(session: Session, window: TrajectoryWindow) -> dict[str | None, int]:
    """How many trajectories of each task type (None where unset) the window holds."""
    inner = _select(window, TrajectoryRow.task_type).subquery()
    statement = select(inner.c.task_type, sa.func.count()).group_by(inner.c.task_type)
    return {task_type: count for task_type, count in session.execute(statement)}


def llm_usage(session: Session, window: TrajectoryWindow) -> dict[uuid.UUID, LlmUsage]:
    """Per trajectory with llm calls: how many, and the sum of their `metadata.cost_usd`."""
    cost = EventRow.body[("metadata", "cost_usd")].as_float()
    statement = _window_events(
        window,
        EventKind.LLM_CALL,
        EventRow.trajectory_id,
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(cost), 0.0),
    ).group_by(EventRow.trajectory_id)
    return {
        trajectory_id: LlmUsage(calls=calls, cost_usd=float(total))
        for trajectory_id, calls, total in session.execute(statement)
    }


def offered_tools(session: Session, window: TrajectoryWindow) -> dict[uuid.UUID, set[str]]:
    """Per trajectory: the names of every tool its llm calls offered the model."""
    # A call's id only where its body holds the tools, so the calls that refer to them
    # fold into one row per trajectory and holder.
    holder = sa.case((TOOLS.is_not(None), EventRow.id))
    statement = _window_events(
        window, EventKind.LLM_CALL, EventRow.trajectory_id, holder, TOOLS, TOOLS_AT
    ).distinct()
    found = session.execute(statement).all()
    offered: dict[uuid.UUID, set[str]] = {}
    lists = offered_tools_of(session, ((held, text, at) for _, held, text, at in found))
    for (trajectory_id, *_), specs in zip(found, lists, strict=True):
        names = offered.setdefault(trajectory_id, set())
        names.update(spec["name"] for spec in specs if spec.get("name"))
    return offered


def offered_tool_lists(session: Session, window: TrajectoryWindow) -> list[list[dict]]:
    """The tools each llm call of the window offered the model, one list per call (calls
    that offered the same tools share one list: read it, do not change it)."""
    statement = _window_events(window, EventKind.LLM_CALL, EventRow.id, TOOLS, TOOLS_AT)
    return offered_tools_of(session, session.execute(statement).all())


def window_events(
    session: Session, window: TrajectoryWindow, kind: EventKind
) -> dict[uuid.UUID, list[Event]]:
    """The window's events of `kind`, whole, by trajectory: for short windows (a gate step)."""
    statement = _window_events(window, kind, *STORED).order_by(EventRow.created_at, EventRow.id)
    found: dict[uuid.UUID, list[Event]] = {}
    for event in stored_events(session, session.execute(statement)):
        found.setdefault(event.trajectory_id, []).append(event)
    return found


def tool_call_records(session: Session, window: TrajectoryWindow) -> list[ToolCallRecord]:
    """Every user tool_call event of the window: the call and its outcome."""
    statement = _window_events(
        window,
        EventKind.TOOL_CALL,
        EventRow.id,
        EventRow.trajectory_id,
        EventRow.body[("action", "call")],
        EventRow.body["outcome"],
    ).order_by(EventRow.created_at, EventRow.id)
    return [
        _tool_call_record(event_id, trajectory_id, call or {}, outcome or {})
        for event_id, trajectory_id, call, outcome in session.execute(statement)
    ]


def _tool_call_record(
    event_id: uuid.UUID, trajectory_id: uuid.UUID, call: dict, outcome: dict
) -> ToolCallRecord:
    return ToolCallRecord(
        event_id=event_id,
        trajectory_id=trajectory_id,
        call_id=call.get("id") or "",
        tool=call.get("name") or "unknown",
        arguments=call.get("arguments") or "",
        success=outcome.get("success"),
        error_class=outcome.get("error_class"),
        error_message=outcome.get("error_message"),
        tool_return=outcome.get("tool_return"),
    )


def follow_up_turns(session: Session, window: TrajectoryWindow) -> list[UserTurn]:
    """Every user message of the window that answers an earlier llm call, oldest first:
    where users correct, clarify or move on."""
    statement = (
        _window_events(
            window,
            EventKind.USER_MESSAGE,
            EventRow.id,
            EventRow.trajectory_id,
            EventRow.parent_id,
            EventRow.created_at,
            EventRow.body[("observation", "messages")],
        )
        .where(EventRow.parent_id.is_not(None))
        .order_by(EventRow.created_at, EventRow.id)
    )
    return [
        UserTurn(
            event_id=event_id,
            trajectory_id=trajectory_id,
            parent_id=parent_id,
            created_at=created_at,
            text=_first_text(messages),
        )
        for event_id, trajectory_id, parent_id, created_at, messages in session.execute(statement)
    ]


def conversation_turns(session: Session, window: TrajectoryWindow) -> list[ConversationTurn]:
    """The window's conversations as the follow-up reading needs them, oldest first: every
    user message, and the answers (llm calls) of the trajectories where a user followed up
    on one (a single-turn trajectory's answer is never read: llm call bodies are heavy).
    An answer the client never received (`metadata.extra.delivered` false) is left out."""
    users = _window_events(
        window,
        EventKind.USER_MESSAGE,
        EventRow.id,
        EventRow.trajectory_id,
        EventRow.parent_id,
        EventRow.seq,
        EventRow.created_at,
        EventRow.body[("observation", "messages")],
    )
    followed = users.with_only_columns(EventRow.trajectory_id).where(
        EventRow.parent_id.is_not(None)
    )
    answers = _window_events(
        window,
        EventKind.LLM_CALL,
        EventRow.id,
        EventRow.trajectory_id,
        EventRow.parent_id,
        EventRow.seq,
        EventRow.created_at,
        EventRow.body[("action", "content")],
        EventRow.body[("metadata", "extra", "delivered")],
    ).where(EventRow.trajectory_id.in_(followed))
    turns = [
        ConversationTurn(
            event_id=event_id, trajectory_id=trajectory_id, parent_id=parent_id, seq=seq,
            created_at=created_at, speaker="user", text=_first_text(messages),
        )
        for event_id, trajectory_id, parent_id, seq, created_at, messages in session.execute(users)
    ]  # fmt: skip
    for event_id, trajectory_id, parent_id, seq, created_at, content, delivered in session.execute(
        answers
    ):
        if delivered is False:
            continue
        text = content if isinstance(content, str) else None
        turns.append(
            ConversationTurn(
                event_id=event_id, trajectory_id=trajectory_id, parent_id=parent_id, seq=seq,
                created_at=created_at, speaker="agent", text=text,
            )
        )  # fmt: skip
    return sorted(turns, key=lambda t: (t.created_at, t.seq))


def _first_text(messages: Any) -> str | None:
    for message in messages or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and content.strip():
            return content
        if isinstance(content, list):
            parts = [p.get("text", "") for p in content if isinstance(p, dict)]
            if any(parts):
                return " ".join(parts)
    return None


def window_rewards(session: Session, window: TrajectoryWindow) -> list[Reward]:
    """Every reward of the window's trajectories (on the whole and on their events)."""
    table = RewardRow.__table__
    # Plain rows, not ORM objects: a window holds thousands of rewards, read once.
    statement = (
        select(table)
        .where(table.c.trajectory_id.in_(_ids(window)), _recorded_since(window, table.c.created_at))
        .order_by(table.c.created_at, table.c.id)
    )
    return [_reward(row) for row in session.execute(statement)]


def rewarded_events(session: Session, window: TrajectoryWindow, kind: EventKind) -> set[uuid.UUID]:
    """The events of `kind` that a reward of the window's trajectories names.

    Joined on the window, not read for a list of ids: a busy window's rewards name more
    events than one statement takes parameters, and the database has them already.
    """
    statement = (
        select(EventRow.id)
        .join(RewardRow, RewardRow.event_id == EventRow.id)
        .where(
            RewardRow.trajectory_id.in_(_ids(window)),
            EventRow.kind == kind.value,
            _recorded_since(window, RewardRow.created_at),
            _recorded_since(window, EventRow.created_at),
        )
        .distinct()
    )
    return set(session.scalars(statement))


def event_kinds(session: Session, event_ids: Collection[uuid.UUID]) -> dict[uuid.UUID, str]:
    """The kind of each of these events that exists."""
    kinds: dict[uuid.UUID, str] = {}
    for chunk in id_chunks(event_ids):
        statement = select(EventRow.id, EventRow.kind).where(EventRow.id.in_(chunk))
        kinds.update(session.execute(statement).all())
    return kinds


def replies(
    session: Session, parent_ids: Collection[uuid.UUID], kind: EventKind = EventKind.USER_MESSAGE
) -> list[Event]:
    """User-traffic events of `kind` caused by these events (e.g. the turn after an answer),
    oldest first."""
    rows: list[Any] = []
    for chunk in id_chunks(parent_ids):
        statement = select(*STORED).where(
            EventRow.parent_id.in_(chunk),
            EventRow.kind == kind.value,
            EventRow.traffic == Traffic.USER.value,
        )
        rows += session.execute(statement).all()
    rows.sort(key=lambda row: (row.created_at, str(row.id)))
    return stored_events(session, rows)
