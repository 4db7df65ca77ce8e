"""The review queue: de-duplicated items, given out in turn, labelled and skipped, counted."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from registry import (
    InvalidRecordError,
    ReviewDraft,
    ReviewKind,
    ReviewStatus,
    close_review_items,
    get_review_item,
    label_review_item,
    list_review_items,
    queue_review_items,
    review_labels,
    review_progress,
    skip_review_item,
    transaction,
)
from tests.registry.helpers import seed_world

AGENT = "support-bot"


def draft(key: str, *evidence: str, kind: ReviewKind = ReviewKind.CORRECTION) -> ReviewDraft:
    return ReviewDraft(
        agent=AGENT, kind=kind, key=key, title=f"about {key}", evidence=list(evidence)
    )


def test_the_same_thing_seen_again_is_one_item_with_its_sightings(engine) -> None:
    seed_world(engine)
    with transaction(engine) as session:
        first = queue_review_items(session, [draft("a", "evo-1")])[0]
        again = queue_review_items(session, [draft("a", "evo-2"), draft("a", "evo-1")])
        other_kind = queue_review_items(session, [draft("a", kind=ReviewKind.FINDING)])[0]
    assert [item.id for item in again] == [first.id, first.id]
    assert again[-1].evidence == ["evo-1", "evo-2"] and again[-1].occurrences == 2
    assert other_kind.id != first.id
    with transaction(engine) as session:
        assert len(list_review_items(session, agent=AGENT)) == 2


def test_items_go_to_the_least_busy_reviewer_and_skips_hand_them_on(engine) -> None:
    seed_world(engine)
    team = ["ana", "bo"]
    with transaction(engine) as session:
        items = queue_review_items(session, [draft(k) for k in "abc"], reviewers=team)
    assert [item.assignee for item in items] == ["ana", "bo", "ana"]
    with transaction(engine) as session:
        skipped = skip_review_item(session, items[0].id, reviewer="ana", reviewers=team)
        assert skipped.assignee == "bo" and skipped.status is ReviewStatus.OPEN
        # bo skips it too: nobody is left who has not passed on it
        passed = skip_review_item(session, items[0].id, reviewer="bo", reviewers=team)
        assert passed.assignee is None and passed.skipped_by == ["ana", "bo"]
        skip_review_item(session, items[0].id, reviewer="bo", reviewers=team)  # once counts
        assert [label.action for label in review_labels(session, items[0].id)] == [
            "skip",
            "skip",
        ]


def test_a_label_is_kept_once_per_request_and_a_relabel_is_appended(engine) -> None:
    seed_world(engine)
    with transaction(engine) as session:
        item = queue_review_items(session, [draft("a")], reviewers=["ana"])[0]
        label = label_review_item(session, item.id, reviewer="ana", label="missing_fact")
        again = label_review_item(session, item.id, reviewer="ana", label="missing_fact")
        assert again.id == label.id
        relabel = label_review_item(session, item.id, reviewer="ana", label="instruction")
        assert relabel.id != label.id
        assert get_review_item(session, item.id).status is ReviewStatus.LABELLED
        assert [x.label for x in review_labels(session, item.id)] == [
            "missing_fact",
            "instruction",
        ]
    # Labels are append-only, whoever writes.
    with pytest.raises(sa.exc.DBAPIError), engine.begin() as connection:
        connection.execute(sa.text("UPDATE review_label SET label = 'other'"))


def test_closed_items_take_no_label(engine) -> None:
    seed_world(engine)
    with transaction(engine) as session:
        item = queue_review_items(session, [draft("a", kind=ReviewKind.APPROVAL)])[0]
        close_review_items(session, [item.id], "approved from the CLI")
        with pytest.raises(InvalidRecordError, match="approved from the CLI"):
            label_review_item(session, item.id, reviewer="ana", label="approve")
        # A new sighting of a settled thing never asks again.
        assert queue_review_items(session, [draft("a", kind=ReviewKind.APPROVAL)])[0].id == item.id
        assert list_review_items(session, agent=AGENT) == []


def test_progress_per_reviewer(engine) -> None:
    seed_world(engine)
    team = ["ana", "bo"]
    with transaction(engine) as session:
        a, b, c, _ = queue_review_items(session, [draft(k) for k in "abcd"], reviewers=team)
        label_review_item(session, a.id, reviewer="ana", label="other")
        label_review_item(session, a.id, reviewer="ana", label="instruction")
        label_review_item(session, b.id, reviewer="ana", label="other")
        skip_review_item(session, c.id, reviewer="ana", reviewers=team)
        progress = review_progress(session, AGENT)
    assert (progress.open, progress.labelled, progress.closed) == (2, 2, 0)
    assert progress.reviewers == {
        "ana": {"open": 0, "labelled": 2, "skipped": 1},
        "bo": {"open": 2, "labelled": 0, "skipped": 0},
    }
