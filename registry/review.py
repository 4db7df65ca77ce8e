"""The review queue: what a person should judge, who was given it, and what they said.

An item is keyed by (agent, kind, key): the same thing seen again (a finding every
evolution repeats, a correction read twice) adds its sighting to the item's `evidence`
instead of asking again, and a thing a person has judged is never asked again. Items are
given to the agent's reviewers in turn, each to whoever has the fewest open; a reviewer
who skips one hands it to another. Labels are append-only: a relabel is a new label.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, Field
from sqlmodel import Session, select

from atdp import utcnow
from registry.errors import InvalidRecordError, NotFoundError
from registry.tables import AgentRow, ReviewItemRow, ReviewLabelRow

__all__ = [
    "ReviewDraft",
    "ReviewItem",
    "ReviewKind",
    "ReviewLabel",
    "ReviewProgress",
    "ReviewStatus",
    "close_review_items",
    "find_review_label",
    "get_review_item",
    "label_review_item",
    "list_review_items",
    "queue_review_items",
    "review_labels",
    "review_progress",
    "set_review_mirror",
    "skip_review_item",
]


class ReviewKind(StrEnum):
    CORRECTION = "correction"  # a user's correction the analysis could not read
    APPROVAL = "approval"  # a candidate waiting for a person at an approval point
    FINDING = "finding"  # a safety check the agent fails, candidate and parent alike
    CANARY = "canary"  # a canary that ended inconclusive and waits for a person


class ReviewStatus(StrEnum):
    OPEN = "open"
    LABELLED = "labelled"
    CLOSED = "closed"  # settled elsewhere (approved from the CLI, the evolution ended)


class ReviewDraft(BaseModel):
    """An item as its producer sees it; `queue_review_items` merges it into the queue.

    Args:
        key: what makes two drafts the same item (within agent and kind).
        evidence: ids of the sightings behind it (trajectories, evolutions); merged as a set.
        subject: the ids the item is about, for whoever acts on its label.
    """

    model_config = ConfigDict(frozen=True)

    agent: str
    kind: ReviewKind
    key: str = Field(min_length=1, max_length=400)
    title: str
    tenant: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)
    subject: dict[str, Any] = Field(default_factory=dict)
    evidence: list[str] = Field(default_factory=list)


class ReviewItem(BaseModel):
    id: int
    agent: str
    tenant: str | None
    kind: ReviewKind
    key: str
    status: ReviewStatus
    title: str
    body: dict[str, Any]
    subject: dict[str, Any]
    evidence: list[str]
    assignee: str | None
    skipped_by: list[str]
    closed_reason: str | None
    mirror: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime

    @property
    def occurrences(self) -> int:
        """How many distinct sightings are behind it (at least one)."""
        return max(1, len(self.evidence))


class ReviewLabel(BaseModel):
    id: int
    item_id: int
    reviewer: str
    action: str  # label | skip
    label: str | None
    score: float | None
    note: str
    effects: dict[str, Any]
    via: str
    created_at: datetime


class ReviewProgress(BaseModel):
    """Counts over the queue: by status, and per reviewer what is open, labelled, skipped."""

    open: int
    labelled: int
    closed: int
    reviewers: dict[str, dict[str, int]]


def _item(row: ReviewItemRow) -> ReviewItem:
    return ReviewItem.model_validate(row, from_attributes=True)


def _label(row: ReviewLabelRow) -> ReviewLabel:
    return ReviewLabel.model_validate(row, from_attributes=True)


def queue_review_items(
    session: Session, drafts: list[ReviewDraft], *, reviewers: list[str] = ()
) -> list[ReviewItem]:
    """Merge drafts into the queue; returns the items they became (new or existing).

    A new item goes to the reviewer of `reviewers` with the fewest open items (None when
    there are none); an existing one only gains the draft's evidence.
    """
    items = []
    for draft in drafts:
        if session.get(AgentRow, draft.agent) is None:
            raise NotFoundError("agent", draft.agent)
        row = _by_key(session, draft.agent, draft.kind, draft.key)
        if row is None:
            row = _insert(session, draft, _least_busy(session, draft.agent, reviewers))
        else:
            merged = list(dict.fromkeys([*row.evidence, *draft.evidence]))
            if merged != row.evidence:
                row.evidence, row.updated_at = merged, utcnow()
                session.add(row)
                session.flush()
        items.append(_item(row))
    return items


def _by_key(session: Session, agent: str, kind: str, key: str) -> ReviewItemRow | None:
    statement = select(ReviewItemRow).where(
        ReviewItemRow.agent == agent, ReviewItemRow.kind == kind, ReviewItemRow.key == key
    )
    return session.exec(statement).first()


def _insert(session: Session, draft: ReviewDraft, assignee: str | None) -> ReviewItemRow:
    now = utcnow()
    row = ReviewItemRow(
        **draft.model_dump(),
        status=ReviewStatus.OPEN.value,
        assignee=assignee,
        skipped_by=[],
        created_at=now,
        updated_at=now,
    )
    session.add(row)
    try:
        with session.begin_nested():  # two producers racing for one key: the first wins
            session.flush()
    except sa.exc.IntegrityError:
        found = _by_key(session, draft.agent, draft.kind, draft.key)
        assert found is not None
        return found
    return row


def _least_busy(
    session: Session, agent: str, reviewers: list[str], *, besides: list[str] = ()
) -> str | None:
    """The reviewer with the fewest open items of the agent (ties: the first listed)."""
    candidates = [r for r in dict.fromkeys(reviewers) if r not in besides]
    if not candidates:
        return None
    statement = select(ReviewItemRow.assignee).where(
        ReviewItemRow.agent == agent,
        ReviewItemRow.status == ReviewStatus.OPEN.value,
        ReviewItemRow.assignee.in_(candidates),
    )
    load = Counter(session.exec(statement).all())
    return min(candidates, key=lambda reviewer: load[reviewer])


def get_review_item(session: Session, item_id: int) -> ReviewItem:
    return _item(_row(session, item_id))


def _row(session: Session, item_id: int) -> ReviewItemRow:
    row = session.get(ReviewItemRow, item_id)
    if row is None:
        raise NotFoundError("review item", item_id)
    return row


def list_review_items(
    session: Session,
    *,
    agent: str | None = None,
    status: ReviewStatus | None = ReviewStatus.OPEN,
    kind: ReviewKind | None = None,
    assignee: str | None = None,
    limit: int = 100,
) -> list[ReviewItem]:
    """Oldest first (a queue), filtered by agent, status (None: any), kind and assignee."""
    statement = select(ReviewItemRow)
    for column, value in (
        (ReviewItemRow.agent, agent),
        (ReviewItemRow.status, status),
        (ReviewItemRow.kind, kind),
        (ReviewItemRow.assignee, assignee),
    ):
        if value is not None:
            statement = statement.where(column == value)
    statement = statement.order_by(ReviewItemRow.id).limit(limit)
    return [_item(row) for row in session.exec(statement)]


def label_review_item(
    session: Session,
    item_id: int,
    *,
    reviewer: str,
    label: str,
    score: float | None = None,
    note: str = "",
    effects: dict[str, Any] | None = None,
    via: str = "api",
) -> ReviewLabel:
    """Record a label; the item is labelled. The same label by the same reviewer again
    (a retried request) returns the one recorded.

    Raises:
        InvalidRecordError: the item was closed (settled elsewhere).
    """
    row = _row(session, item_id)
    if row.status == ReviewStatus.CLOSED.value:
        raise InvalidRecordError(
            f"review item {item_id} is closed ({row.closed_reason or 'settled elsewhere'}); "
            "nothing to label"
        )
    same = find_review_label(
        session, item_id, reviewer=reviewer, label=label, score=score, note=note
    )
    if same is not None:
        return same
    recorded = _append(
        session, item_id, reviewer, "label", label=label, score=score, note=note,
        effects=effects or {}, via=via,
    )  # fmt: skip
    row.status, row.updated_at = ReviewStatus.LABELLED.value, utcnow()
    session.add(row)
    session.flush()
    return recorded


def skip_review_item(
    session: Session, item_id: int, *, reviewer: str, reason: str = "", reviewers: list[str] = ()
) -> ReviewItem:
    """`reviewer` passes on an open item: it goes to another of `reviewers` (never back to
    one who skipped it), or to nobody. Skipping twice records one skip."""
    row = _row(session, item_id)
    if row.status != ReviewStatus.OPEN.value:
        raise InvalidRecordError(f"review item {item_id} is {row.status}; only open items skip")
    if reviewer not in row.skipped_by:
        _append(session, item_id, reviewer, "skip", note=reason, via="api")
        row.skipped_by = [*row.skipped_by, reviewer]
    if row.assignee is None or row.assignee in row.skipped_by:
        row.assignee = _least_busy(session, row.agent, list(reviewers), besides=row.skipped_by)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()
    return _item(row)


def close_review_items(session: Session, item_ids: list[int], reason: str) -> list[ReviewItem]:
    """Close open items settled elsewhere; labelled and closed ones stay as they are."""
    closed = []
    for item_id in item_ids:
        row = _row(session, item_id)
        if row.status == ReviewStatus.OPEN.value:
            row.status, row.closed_reason, row.updated_at = "closed", reason, utcnow()
            session.add(row)
            closed.append(row)
    session.flush()
    return [_item(row) for row in closed]


def set_review_mirror(session: Session, item_id: int, mirror: dict[str, Any]) -> ReviewItem:
    """Where the item is mirrored (MLflow's trace and queue ids)."""
    row = _row(session, item_id)
    row.mirror = mirror
    session.add(row)
    session.flush()
    return _item(row)


def review_labels(session: Session, item_id: int) -> list[ReviewLabel]:
    """Every label and skip of the item, oldest first."""
    statement = (
        select(ReviewLabelRow).where(ReviewLabelRow.item_id == item_id).order_by(ReviewLabelRow.id)
    )
    return [_label(row) for row in session.exec(statement)]


def review_progress(session: Session, agent: str | None = None) -> ReviewProgress:
    """The queue's counts by status, and each reviewer's open, labelled and skipped."""
    items = select(ReviewItemRow.status, ReviewItemRow.assignee)
    labels = select(ReviewLabelRow.reviewer, ReviewLabelRow.action, ReviewLabelRow.item_id).join(
        ReviewItemRow, ReviewItemRow.id == ReviewLabelRow.item_id
    )
    if agent is not None:
        items = items.where(ReviewItemRow.agent == agent)
        labels = labels.where(ReviewItemRow.agent == agent)
    by_status: Counter[str] = Counter()
    reviewers: dict[str, Counter[str]] = {}
    for status, assignee in session.exec(items):
        by_status[status] += 1
        if status == ReviewStatus.OPEN.value and assignee is not None:
            reviewers.setdefault(assignee, Counter())["open"] += 1
    for reviewer, action, _ in set(session.exec(labels)):  # an item counts once, relabelled
        counted = "labelled" if action == "label" else "skipped"
        reviewers.setdefault(reviewer, Counter())[counted] += 1
    return ReviewProgress(
        open=by_status[ReviewStatus.OPEN.value],
        labelled=by_status[ReviewStatus.LABELLED.value],
        closed=by_status[ReviewStatus.CLOSED.value],
        reviewers={
            name: {key: counts[key] for key in ("open", "labelled", "skipped")}
            for name, counts in sorted(reviewers.items())
        },
    )


def find_review_label(
    session: Session,
    item_id: int,
    *,
    reviewer: str,
    label: str,
    score: float | None = None,
    note: str = "",
) -> ReviewLabel | None:
    """The reviewer's latest label of the item when it is this one (a request repeated);
    None when they have not given it, or have given another since."""
    statement = (
        select(ReviewLabelRow)
        .where(
            ReviewLabelRow.item_id == item_id,
            ReviewLabelRow.reviewer == reviewer,
            ReviewLabelRow.action == "label",
        )
        .order_by(ReviewLabelRow.id.desc())
    )
    last = session.exec(statement).first()
    if last is None or (last.label, last.score, last.note) != (label, score, note):
        return None
    return _label(last)


def _append(session: Session, item_id: int, reviewer: str, action: str, **fields) -> ReviewLabel:
    row = ReviewLabelRow(
        item_id=item_id, reviewer=reviewer, action=action, created_at=utcnow(), **fields
    )
    session.add(row)
    session.flush()
    return _label(row)
