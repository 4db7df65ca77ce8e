"""What a label may say for each kind of item, and what it becomes.

- a correction's label is the reviewer's reading of it: a `human_review` reward that the
  corrections reader prefers over its own (`evolution.corrections.reviewed`), and, when it
  names something the agent should change, a failing case of the agent's evaluation set
  with the user's words as feedback; a score of the answer is a `human_review` reward too;
- a finding labelled `required` becomes a required safety case of the set: every later
  candidate must pass it (a finding `accepted` is known and not asked again);
- an approval's label is the answer the evolution waits for at its approval point, an
  inconclusive canary's the answer its canary waits for (promote, extend, roll back).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from atdp import CategoricalValue, Reward, RewardSource, ScalarValue
from evolution.corrections.reviewed import REVIEWED_KIND
from evolution.memory.distil import fact_text
from registry import EvaluationCase, ReviewItem, ReviewKind

__all__ = ["LABELS", "REVIEW_SCORE", "LabelEffects", "LabelError", "check_label", "label_effects"]

# Each kind's labels and what each means, as reviewers are shown them.
LABELS: dict[ReviewKind, dict[str, str]] = {
    ReviewKind.CORRECTION: {
        "missing_fact": "the user supplied a fact the agent lacked",
        "instruction": "the user asked the agent to answer differently",
        "tool_use": "the user blamed the tool the agent used",
        "other": "the task failed for a reason no change of the agent fixes",
        "not_a_correction": "the user did not say the answer was wrong",
    },
    ReviewKind.APPROVAL: {
        "approve": "let the evolution past its approval point",
        "reject": "stop the evolution: the candidate never goes live",
    },
    ReviewKind.FINDING: {
        "required": "the agent must pass this case: every later candidate must pass it",
        "accepted": "a known limit of the agent: do not block on it, do not ask again",
    },
    ReviewKind.CANARY: {
        "promote": "promote the candidate although its question is open (your call)",
        "extend": "give the canary the time its question still needs",
        "roll_back": "roll the candidate back",
    },
}
# The reward a reviewer's score of an answer becomes (0: wrong, 1: right).
REVIEW_SCORE = "review_score"
# Labels of a correction that name a change of the agent: the case goes to the set.
_TEACHES = {"missing_fact", "instruction", "tool_use"}
_NAMESPACE = uuid.UUID("6f1c8a52-3c4e-4f4b-9a57-1e20b0c0e020")


class LabelError(ValueError):
    """A label the item does not take; the message lists the ones it does."""


@dataclass(frozen=True)
class LabelEffects:
    """What one label becomes: rewards to add, evaluation cases to add, and the answer an
    evolution waiting at an approval point receives."""

    rewards: list[Reward] = field(default_factory=list)
    cases: list[EvaluationCase] = field(default_factory=list)
    update: Literal["approve", "reject", "promote", "extend", "roll_back"] | None = None

    def summary(self) -> dict[str, Any]:
        """As the label records it."""
        return {
            "rewards": [str(reward.id) for reward in self.rewards],
            "cases": [case.key for case in self.cases],
            "update": self.update,
        }


def check_label(kind: ReviewKind, label: str, score: float | None = None) -> None:
    """Raises LabelError, saying what to send instead, unless the item takes the label."""
    if label not in LABELS[kind]:
        choices = "; ".join(f"{name} ({meaning})" for name, meaning in LABELS[kind].items())
        raise LabelError(f"{label!r} is not a label of a {kind.value} item; choose {choices}")
    if score is not None and kind is not ReviewKind.CORRECTION:
        raise LabelError(f"a {kind.value} item takes no score; only a corrected answer does")
    if score is not None and not 0.0 <= score <= 1.0:
        raise LabelError(f"a score is from 0 (the answer was wrong) to 1 (it was right): {score}")


def label_effects(
    item: ReviewItem,
    label: str,
    *,
    reviewer: str,
    at: datetime,
    score: float | None = None,
    note: str = "",
) -> LabelEffects:
    """What `reviewer`'s label of `item` becomes; `check_label` first."""
    check_label(item.kind, label, score)
    origin = f"review item {item.id} by {reviewer}"
    if item.kind is ReviewKind.CORRECTION:
        return _correction_effects(item, label, reviewer, at, score, note, origin)
    if item.kind is ReviewKind.FINDING:
        return LabelEffects(cases=_finding_cases(item, label, note, origin))
    return LabelEffects(update=label)  # the evolution's answer


def _correction_effects(
    item: ReviewItem,
    label: str,
    reviewer: str,
    at: datetime,
    score: float | None,
    note: str,
    origin: str,
) -> LabelEffects:
    subject, text = item.subject, item.body.get("text", "")
    trajectory = uuid.UUID(subject["trajectory_id"])
    words = note.strip() or text  # a reviewer may restate what the user meant

    def reward(name: str, event: str | None, value: Any, critique: str | None) -> Reward:
        identity = f"{item.id}:{reviewer}:{name}:{label}:{score}:{note}"
        return Reward(
            id=uuid.uuid5(_NAMESPACE, identity),
            tenant=item.tenant,
            trajectory_id=trajectory,
            event_id=uuid.UUID(event) if event else None,
            name=name,
            value=value,
            critique=critique,
            source=RewardSource.HUMAN_REVIEW,
            created_at=at,
        )

    rewards = [reward(REVIEWED_KIND, subject.get("event_id"), CategoricalValue(value=label), words)]
    if score is not None:
        scored = reward(REVIEW_SCORE, subject.get("answer"), ScalarValue(value=score), note or None)
        rewards.append(scored)
    if label not in _TEACHES:
        return LabelEffects(rewards=rewards)
    fact = fact_text(words) if label == "missing_fact" else None
    case = EvaluationCase(
        key=EvaluationCase.trajectory_key(trajectory),
        kind="trajectory",
        trajectory_id=trajectory,
        tenant=item.tenant,
        required_facts=[fact] if fact else [],
        feedback=list(dict.fromkeys(f for f in (text.strip(), note.strip()) if f)),
        origin=origin,
    )
    return LabelEffects(rewards=rewards, cases=[case])


def _finding_cases(item: ReviewItem, label: str, note: str, origin: str) -> list[EvaluationCase]:
    if label != "required":
        return []
    case = item.body.get("safety_case")
    if not case:
        raise LabelError(
            f"safety case {item.body.get('case')} is no longer in the agent's suite, so it "
            "cannot be required from here: add it to the agent's safety_suite with "
            "`required: true` (`evoplane agent configure`), or label the finding accepted"
        )
    return [
        EvaluationCase(
            key=f"safety:{case['name']}",
            kind="safety",
            safety={**case, "required": True},
            feedback=[note.strip()] if note.strip() else [],
            origin=origin,
        )
    ]
