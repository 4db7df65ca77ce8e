"""Event bodies in and out of the `event` table: writers store `registry.codec`'s encoding,
every reader gets the whole ATDP documents back through `documents` or `events`.

A writer refers an event to the trajectory's latest llm_call only when this process wrote
that call itself and its transaction committed (`Recent`); anything else (another gateway
replica served the turn before, a restart, a rollback) stores the body without a
reference. A reference saves space; no write ever needs one.

`EVOPLANE_EVENT_CODEC=off` makes writers store whole documents, as before the codec:
readers take both forms, so a rolling upgrade sets it on the new processes until every
reader (gateways, workers, the CLI) has the new code, then lifts it.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, select

from atdp import Event
from registry.codec import Columns, Earlier, decode, encode, reference
from registry.tables import EventRow

__all__ = [
    "STORED",
    "TOOLS",
    "TOOLS_AT",
    "documents",
    "events",
    "offered_tools_of",
    "stored_bodies",
]

# What a reader selects to rebuild a body: the body and the columns it leaves out.
STORED = (
    EventRow.id,
    EventRow.trajectory_id,
    EventRow.seq,
    EventRow.kind,
    EventRow.parent_id,
    EventRow.created_at,
    EventRow.expires_at,
    EventRow.tenant,
    EventRow.traffic,
    EventRow.training,
    EventRow.replay_class,
    EventRow.body,
)
_LLM_CALL = "llm_call"
_CHUNK = 500


class Recent:
    """The latest committed llm_call of each trajectory this process wrote, least recently
    written dropped first: what the next event of a session may refer to. A call is held
    as its whole document (some 10-20 KB in memory for a few turns of chat), so `capacity`
    bounds the memory; a session that fell out stores its next body whole."""

    def __init__(self, capacity: int = 2_048) -> None:
        self.capacity = capacity
        self._calls: OrderedDict[tuple[str, str], Earlier] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> Earlier | None:
        """The call of (database, trajectory id), if known."""
        with self._lock:
            return self._calls.get(key)

    def forget(self, trajectory_id: uuid.UUID) -> None:
        with self._lock:
            for key in [key for key in self._calls if key[1] == str(trajectory_id)]:
                del self._calls[key]

    def publish(self, calls: dict[tuple[str, str], Earlier]) -> None:
        with self._lock:
            for trajectory_id, call in calls.items():
                known = self._calls.pop(trajectory_id, None)
                newer = known is None or known.document["seq"] < call.document["seq"]
                self._calls[trajectory_id] = call if newer else known
            while len(self._calls) > self.capacity:
                self._calls.popitem(last=False)


RECENT = Recent()
_PENDING = "registry.bodies.pending"  # Session.info key: this transaction's llm_calls


def stored_bodies(session: Session, documents: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bodies to store for these events' ATDP documents, in their order.

    An llm_call written here becomes what later events of its trajectory may refer to,
    once the session commits (a rolled-back call must never be referred to)."""
    if not encoding():
        return list(documents)
    pending = _pending(session)
    database = str(session.get_bind().url)  # a trajectory's events may go to two registries
    stored = []
    for document in documents:
        key = (database, document["trajectory_id"])
        earlier = pending.get(key) or RECENT.get(key)
        body = encode(document, earlier)
        if document["kind"] == _LLM_CALL:
            pending[key] = Earlier.of(document, body)
        stored.append(body)
    return stored


def encoding() -> bool:
    """Whether writers store encoded bodies (`EVOPLANE_EVENT_CODEC`: on, the default, or
    off)."""
    value = os.environ.get("EVOPLANE_EVENT_CODEC", "on").strip().lower()
    if value not in {"on", "off"}:
        raise ValueError(f"EVOPLANE_EVENT_CODEC must be 'on' or 'off', not {value!r}")
    return value == "on"


def _pending(session: Session) -> dict[tuple[str, str], Earlier]:
    pending = session.info.get(_PENDING)
    if pending is None:
        pending = session.info[_PENDING] = {}
        sa.event.listen(session, "after_commit", _publish)
        sa.event.listen(session, "after_rollback", _forget)
    return pending


def _publish(session: Session) -> None:
    RECENT.publish(session.info.get(_PENDING) or {})
    _forget(session)


def _forget(session: Session) -> None:
    session.info.get(_PENDING, {}).clear()


def documents(session: Session, rows: Iterable[Any]) -> list[dict[str, Any]]:
    """The whole ATDP documents of rows selected with `STORED`, in their order; reads the
    earlier llm_calls their bodies refer to."""
    rows = list(rows)
    known = {row.id: row for row in rows}
    _read_references(session, known)
    decoded: dict[uuid.UUID, dict[str, Any]] = {}
    for row in sorted(known.values(), key=lambda r: (str(r.trajectory_id), r.seq)):
        earlier = reference(row.body)
        decoded[row.id] = decode(row.body, _columns(row), decoded[earlier] if earlier else None)
    return [decoded[row.id] for row in rows]


def events(session: Session, rows: Iterable[Any]) -> list[Event]:
    """`documents` as ATDP events."""
    return [Event.model_validate(document) for document in documents(session, rows)]


def _columns(row: Any) -> Columns:
    return Columns(
        id=row.id,
        trajectory_id=row.trajectory_id,
        seq=row.seq,
        kind=row.kind,
        parent_id=row.parent_id,
        created_at=row.created_at,
        expires_at=row.expires_at,
        tenant=row.tenant,
        traffic=row.traffic,
        training=row.training,
        replay_class=row.replay_class,
    )


def _read_references(session: Session, known: dict[uuid.UUID, Any]) -> None:
    """Add to `known` every earlier llm_call its bodies refer to, and theirs.

    First the llm_calls before each referring row on its day (one query reads a whole
    chain), then by id whatever is still missing."""
    referring = [row for row in known.values() if _missing(row, known)]
    for chunk in _chunks(referring):
        _add(known, session.execute(_calls_before(chunk)))
    while missing := {reference(row.body) for row in known.values() if _missing(row, known)}:
        found = 0
        for chunk in _chunks(sorted(missing)):
            found += _add(known, session.execute(select(*STORED).where(EventRow.id.in_(chunk))))
        if not found:
            raise LookupError(f"llm_calls {sorted(map(str, missing))} referred to are missing")


def _missing(row: Any, known: dict[uuid.UUID, Any]) -> bool:
    earlier = reference(row.body)
    return earlier is not None and earlier not in known


def _add(known: dict[uuid.UUID, Any], rows: Iterable[Any]) -> int:
    added = 0
    for row in rows:
        if row.id not in known:
            known[row.id] = row
            added += 1
    return added


def _calls_before(rows: list[Any]) -> sa.Select:
    """The llm_calls of these rows' trajectories before each, on its day (its partition)."""
    latest: dict[uuid.UUID, Any] = {}
    for row in rows:
        if row.trajectory_id not in latest or latest[row.trajectory_id].seq < row.seq:
            latest[row.trajectory_id] = row
    conditions = []
    for row in latest.values():
        day = datetime.combine(row.created_at.astimezone(UTC).date(), time(), UTC)
        conditions.append(
            sa.and_(
                EventRow.trajectory_id == row.trajectory_id,
                EventRow.seq < row.seq,
                EventRow.created_at >= day,
                EventRow.created_at < day + timedelta(days=1),
            )
        )
    return select(*STORED).where(EventRow.kind == _LLM_CALL, sa.or_(*conditions))


def _chunks(items: Sequence[Any]) -> Iterable[Sequence[Any]]:
    """`items` in slices of at most `_CHUNK`."""
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


def offered_tools_of(
    session: Session, found: Iterable[tuple[uuid.UUID | None, str | None, str | None]]
) -> list[list[dict[str, Any]]]:
    """The tools each of these llm_calls offered, from its (id, `TOOLS` text, `TOOLS_AT`).

    A call that left its tools out (the same as its previous call's) gets those of the
    call its body names: one of `found` when it is there, else read from the table. The
    same text is parsed once, so calls offering the same tools share one list: read it,
    do not change it.
    """
    found = list(found)
    parsed: dict[str, list[dict[str, Any]]] = {}
    held = {
        event_id: _parsed(text, parsed)
        for event_id, text, _ in found
        if event_id is not None and text is not None
    }
    follow = {uuid.UUID(at) for _, text, at in found if text is None and at}
    held |= _held_tools(session, follow - held.keys(), parsed)
    return [
        _parsed(text, parsed) if text is not None else held[uuid.UUID(at)] if at else []
        for _, text, at in found
    ]


# What a reader selects to learn the tools an llm_call offered: its stored
# `observation.tools` as JSON text (parsed in Python, once per distinct list), and where a
# body that left them out names the call whose body holds them.
TOOLS = EventRow.body[("observation", "tools")].as_string()
TOOLS_AT = EventRow.body[("ref", "tools")].as_string()


def _parsed(text: str, parsed: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    if text not in parsed:
        parsed[text] = json.loads(text) or []
    return parsed[text]


def _held_tools(
    session: Session, holders: set[uuid.UUID], parsed: dict[str, list[dict[str, Any]]]
) -> dict[uuid.UUID, list[dict]]:
    """The tools the bodies of these llm_calls hold, following those that refer on."""
    resolved: dict[uuid.UUID, list[dict]] = {}
    follow: dict[uuid.UUID, uuid.UUID] = {}
    while wanted := holders - resolved.keys() - follow.keys():
        for chunk in _chunks(sorted(wanted)):
            statement = select(EventRow.id, TOOLS, TOOLS_AT).where(EventRow.id.in_(chunk))
            for event_id, text, further in session.execute(statement):
                if further is None:
                    resolved[event_id] = _parsed(text, parsed) if text is not None else []
                else:
                    follow[event_id] = uuid.UUID(further)
        if missing := wanted - resolved.keys() - follow.keys():
            raise LookupError(f"llm_calls {sorted(map(str, missing))} referred to are missing")
        holders = holders | set(follow.values())
    for event_id in follow:
        resolved[event_id] = resolved[_holder(event_id, follow)]
    return resolved


def _holder(event_id: uuid.UUID, follow: dict[uuid.UUID, uuid.UUID]) -> uuid.UUID:
    while event_id in follow:
        event_id = follow[event_id]
    return event_id
