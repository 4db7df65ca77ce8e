"""Evaluation sets: the cases people reviewed and the past failures a promotion fixed, kept
per agent as immutable, numbered versions (`<agent>/<name>@v<n>`).

A change makes a new version holding every case (the parent's, with the change applied);
the same content again returns the version that has it, so a retried write never makes a
twin. A case names a recorded trajectory (or holds a safety case); it never copies the
trajectory's content, so a tenant's retention still decides how long it can be replayed.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field, model_validator
from sqlmodel import Session, func, select

from atdp import Event, utcnow
from registry.errors import InvalidRecordError, NotFoundError
from registry.tables import AgentRow, EvaluationSetRow
from registry.trajectories import trajectory_events

__all__ = [
    "DEFAULT_SET",
    "EvaluationCase",
    "EvaluationSet",
    "add_evaluation_cases",
    "evaluation_set_events",
    "get_evaluation_set",
    "latest_evaluation_set",
    "list_evaluation_sets",
    "remove_evaluation_cases",
]

DEFAULT_SET = "default"


class EvaluationCase(BaseModel):
    """One case of an evaluation set.

    Args:
        key: unique within a set: `trajectory:<id>` or `safety:<name>`.
        kind: a recorded trajectory to replay, or a safety case to answer.
        status: `failing`: a failure a candidate should fix (replayed as a past failure);
            `fixed`: a failure a promoted version fixed, which must stay fixed (replayed
            beside the known successes, judged by its facts, not its recorded outcome).
        required_facts: facts a good answer states (from users' and reviewers' words).
        feedback: what users and reviewers said was wrong, in their words; the harness
            optimiser hands them to GEPA as textual feedback.
        safety: a safety case (`evolution.safety.SafetyCase` as JSON) for kind `safety`.
        origin: where it came from, in words ("review item 12 by ana").
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str = Field(min_length=1, max_length=400)
    kind: Literal["trajectory", "safety"]
    status: Literal["failing", "fixed"] = "failing"
    trajectory_id: uuid.UUID | None = None
    tenant: str | None = None
    required_facts: list[str] = Field(default_factory=list)
    feedback: list[str] = Field(default_factory=list)
    safety: dict[str, Any] | None = None
    origin: str = ""

    @model_validator(mode="after")
    def _what_it_names(self) -> EvaluationCase:
        if self.kind == "trajectory" and (self.trajectory_id is None or self.tenant is None):
            raise ValueError("a trajectory case names its trajectory_id and tenant")
        if self.kind == "safety" and not self.safety:
            raise ValueError("a safety case holds the case (`safety`)")
        return self

    @classmethod
    def trajectory_key(cls, trajectory_id: uuid.UUID | str) -> str:
        return f"trajectory:{trajectory_id}"


class EvaluationSet(BaseModel):
    id: str
    agent: str
    name: str
    number: int
    content_hash: str
    parent_id: str | None
    cases: list[EvaluationCase]
    author: str
    reason: str
    created_at: datetime

    def case(self, key: str) -> EvaluationCase | None:
        return next((case for case in self.cases if case.key == key), None)


def _set(row: EvaluationSetRow) -> EvaluationSet:
    return EvaluationSet.model_validate(row, from_attributes=True)


def _content_hash(cases: Sequence[EvaluationCase]) -> str:
    canonical = json.dumps(
        [case.model_dump(mode="json") for case in cases], sort_keys=True, separators=(",", ":")
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def add_evaluation_cases(
    session: Session,
    agent: str,
    cases: Sequence[EvaluationCase],
    *,
    name: str = DEFAULT_SET,
    author: str,
    reason: str,
    max_cases: int | None = None,
) -> EvaluationSet:
    """The set with `cases` added (a case replaces the one with its key), as a new version;
    the latest version when nothing changed.

    Args:
        max_cases: keep at most this many, dropping the oldest fixed cases first, then the
            oldest failing ones (a set must stay small enough to replay at every gate).
    """
    latest = latest_evaluation_set(session, agent, name)
    held = {case.key: case for case in (latest.cases if latest else [])}
    for case in cases:
        held.pop(case.key, None)  # a replaced case moves to the end: it is the newest
        held[case.key] = case
    return _store(session, agent, name, _capped(list(held.values()), max_cases), author, reason)


def remove_evaluation_cases(
    session: Session, agent: str, keys: Sequence[str], *, name: str = DEFAULT_SET, author: str,
    reason: str,
) -> EvaluationSet:  # fmt: skip
    """The set without the cases named by `keys`, as a new version."""
    latest = latest_evaluation_set(session, agent, name)
    if latest is None:
        raise NotFoundError("evaluation set", f"{agent}/{name}")
    kept = [case for case in latest.cases if case.key not in set(keys)]
    return _store(session, agent, name, kept, author, reason)


def _capped(cases: list[EvaluationCase], max_cases: int | None) -> list[EvaluationCase]:
    if max_cases is None or len(cases) <= max_cases:
        return cases
    excess = len(cases) - max_cases
    dropped = [c.key for c in cases if c.status == "fixed"][:excess]
    dropped += [c.key for c in cases if c.status == "failing"][: excess - len(dropped)]
    return [case for case in cases if case.key not in set(dropped)]


def _store(
    session: Session,
    agent: str,
    name: str,
    cases: list[EvaluationCase],
    author: str,
    reason: str,
) -> EvaluationSet:
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    if not name or "/" in name or "@" in name:
        raise InvalidRecordError(f"{name!r} cannot name an evaluation set: no '/' or '@'")
    content_hash = _content_hash(cases)
    for _ in range(5):  # concurrent writers race for the next number
        existing = session.exec(
            select(EvaluationSetRow).where(
                EvaluationSetRow.agent == agent,
                EvaluationSetRow.name == name,
                EvaluationSetRow.content_hash == content_hash,
            )
        ).first()
        if existing is not None:
            return _set(existing)
        latest = latest_evaluation_set(session, agent, name)
        number = (latest.number if latest else 0) + 1
        row = EvaluationSetRow(
            id=f"{agent}/{name}@v{number}",
            agent=agent,
            name=name,
            number=number,
            content_hash=content_hash,
            parent_id=latest.id if latest else None,
            cases=[case.model_dump(mode="json") for case in cases],
            author=author,
            reason=reason,
            created_at=utcnow(),
        )
        session.add(row)
        try:
            with session.begin_nested():
                session.flush()
        except sa.exc.IntegrityError:
            continue
        return _set(row)
    raise InvalidRecordError(f"could not store a version of {agent}/{name}: too many writers")


def latest_evaluation_set(
    session: Session, agent: str, name: str = DEFAULT_SET
) -> EvaluationSet | None:
    """The newest version of the set, or None when it has none."""
    newest = session.exec(
        select(func.max(EvaluationSetRow.number)).where(
            EvaluationSetRow.agent == agent, EvaluationSetRow.name == name
        )
    ).one()
    return None if newest is None else get_evaluation_set(session, agent, name, newest)


def get_evaluation_set(session: Session, agent: str, name: str, number: int) -> EvaluationSet:
    row = session.get(EvaluationSetRow, f"{agent}/{name}@v{number}")
    if row is None:
        raise NotFoundError("evaluation set", f"{agent}/{name}@v{number}")
    return _set(row)


def list_evaluation_sets(session: Session, agent: str) -> list[EvaluationSet]:
    """Every version of every set of the agent, by name, newest version first."""
    statement = (
        select(EvaluationSetRow)
        .where(EvaluationSetRow.agent == agent)
        .order_by(EvaluationSetRow.name, EvaluationSetRow.number.desc())
    )
    return [_set(row) for row in session.exec(statement)]


def evaluation_set_events(
    session: Session, evaluation_set: EvaluationSet
) -> dict[uuid.UUID, list[Event]]:
    """The recorded events of the set's trajectory cases, each as its case's tenant sees
    them (a trajectory whose events are gone, or are another tenant's, has none), read in
    one query per 500 cases."""
    cases = [case for case in evaluation_set.cases if case.kind == "trajectory"]
    recorded = trajectory_events(session, {case.trajectory_id for case in cases})
    return {
        case.trajectory_id: [
            event for event in recorded.get(case.trajectory_id, []) if event.tenant == case.tenant
        ]
        for case in cases
    }
