"""A reviewer's reading of a correction: it decides over the offline and the judge's.

A person who labels a correction in the review queue records a `human_review` reward named
`correction_kind` on the event that holds the user's words (or on the trajectory, for
feedback that named no answer): its category is the kind they read (or
`not_a_correction`), its critique the correction in the words the agent should use (the
user's own, unless the reviewer restated them). The latest such reward wins.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from atdp import Reward, RewardSource
from evolution.corrections.classify import CorrectionKind

__all__ = ["NOT_A_CORRECTION", "REVIEWED_KIND", "apply_reviews", "reviewed_event"]

REVIEWED_KIND = "correction_kind"
NOT_A_CORRECTION = "not_a_correction"
# A `UserCorrection` (evolution.corrections.window, which calls this module).
UserCorrection = TypeVar("UserCorrection", bound=Any)


def reviewed_event(correction: UserCorrection) -> uuid.UUID | None:
    """The event a reviewer's reading of `correction` is recorded on (None: its trajectory)."""
    return None if correction.source.startswith("reward:") else uuid.UUID(correction.source)


def apply_reviews(
    corrections: Sequence[UserCorrection], rewards: Iterable[Reward]
) -> list[UserCorrection]:
    """The corrections as reviewers read them: their kind (and wording) from the latest
    reading of each, those read as no correction at all left out."""
    readings = _latest_readings(rewards)
    if not readings:
        return list(corrections)
    read = []
    for correction in corrections:
        reading = readings.get((correction.trajectory_id, reviewed_event(correction)))
        if reading is None:
            read.append(correction)
        elif reading.value.value != NOT_A_CORRECTION:
            read.append(_as_read(correction, reading))
    return read


def _latest_readings(rewards: Iterable[Reward]) -> dict[tuple, Reward]:
    latest: dict[tuple, Reward] = {}
    for reward in rewards:
        if reward.source is not RewardSource.HUMAN_REVIEW or reward.name != REVIEWED_KIND:
            continue
        if reward.value.kind != "categorical":
            continue
        key = (reward.trajectory_id, reward.event_id)
        held = latest.get(key)
        if held is None or (reward.created_at, reward.id) > (held.created_at, held.id):
            latest[key] = reward
    return latest


def _as_read(correction: UserCorrection, reading: Reward) -> UserCorrection:
    try:
        kind = CorrectionKind(reading.value.value)
    except ValueError:  # a category this version does not know: keep the machine's reading
        return correction
    text = (reading.critique or "").strip() or correction.text
    read = {"kind": kind, "text": text, "about": None}
    if text != correction.text and hasattr(correction, "own"):
        read["own"] = frozenset()  # the user's own values were read in the user's words
    return replace(correction, **read)
