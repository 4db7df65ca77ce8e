"""What needs a person, as review drafts: unsure corrections, findings about the agent, and
evolutions waiting at an approval point (an inconclusive canary among them).

Each draft's key says when two sightings are the same thing to judge, so the queue asks
once: a correction by its trajectory and the event holding the words, a finding by its
safety case and the checks it fails (whichever evolution found it), an approval by its
evolution and point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evolution.corrections import CorrectionKind, UserCorrection
from evolution.corrections.reviewed import reviewed_event
from evolution.review.labels import LABELS
from evolution.safety import SafetyCase
from registry import EvolutionRecord, ReviewDraft, ReviewKind

__all__ = ["awaiting_draft", "correction_drafts", "finding_drafts", "is_unsure"]

_QUOTED = 80  # characters of a user's words in an item's title


def is_unsure(correction: UserCorrection) -> bool:
    """The analysis could not tell what the correction asks for: no reading named a kind
    and the user picked no category. (A reading a reviewer gave is never unsure: it was
    applied before this is asked.)"""
    return correction.kind is CorrectionKind.OTHER and correction.category is None


def correction_drafts(agent: str, corrections: Sequence[UserCorrection]) -> list[ReviewDraft]:
    """A draft for each correction the analysis could not read."""
    return [_correction_draft(agent, c) for c in corrections if is_unsure(c)]


def _correction_draft(agent: str, correction: UserCorrection) -> ReviewDraft:
    event = reviewed_event(correction)
    return ReviewDraft(
        agent=agent,
        kind=ReviewKind.CORRECTION,
        key=f"correction:{correction.trajectory_id}:{correction.source}",
        title=f"What does this correction ask for? \u201c{_short(correction.text)}\u201d",
        tenant=correction.tenant,
        body={
            "text": correction.text,
            "reading": correction.kind.value,
            "session": correction.session,
            "at": correction.at.isoformat(),
            "choices": LABELS[ReviewKind.CORRECTION],
        },
        subject={
            "trajectory_id": str(correction.trajectory_id),
            "event_id": str(event) if event else None,
            "answer": str(correction.answer) if correction.answer else None,
        },
        evidence=[str(correction.trajectory_id)],
    )


def finding_drafts(
    agent: str, records: Sequence[EvolutionRecord], suite: Sequence[SafetyCase]
) -> list[ReviewDraft]:
    """A draft for each finding the evolutions' replay gates reported: a safety case the
    candidate and its parent both fail (a fact about the agent no gate blocks on)."""
    cases = {case.name: case for case in suite}
    drafts = []
    for record in records:
        for stage in record.stages:
            for finding in stage.get("findings") or []:
                drafts.append(_finding_draft(agent, record.id, finding, cases.get(finding["case"])))
    return drafts


def _finding_draft(
    agent: str, evolution_id: str, finding: Mapping[str, Any], case: SafetyCase | None
) -> ReviewDraft:
    checks = sorted(finding.get("checks") or [])
    return ReviewDraft(
        agent=agent,
        kind=ReviewKind.FINDING,
        key=f"finding:{finding['case']}:{','.join(checks)}",
        title=(
            f"The agent fails safety case {finding['case']} ({', '.join(checks)}), "
            "the stable version too: must it pass?"
        ),
        body={
            "case": finding["case"],
            "checks": checks,
            "reason": finding.get("reason", ""),
            "parent_reason": finding.get("parent_reason", ""),
            "safety_case": case.model_dump(mode="json") if case else None,
            "choices": LABELS[ReviewKind.FINDING],
        },
        subject={"case": finding["case"], "evolution_id": evolution_id},
        evidence=[evolution_id],
    )


def awaiting_draft(
    agent: str, status: Mapping[str, Any], diff: Mapping[str, Any] | None
) -> ReviewDraft | None:
    """The draft of an evolution waiting for a person (its `status` query, as JSON), with
    the candidate's diff against its parent; None when it waits for nobody.

    A canary that ended inconclusive and asks a person says so in the status
    (`inconclusive`: the open question, the sessions and hours it still needs); a status
    without that field marks one by a marginal last canary at an approval point.
    """
    question = status.get("inconclusive")
    point = status.get("awaiting_approval") or ("canary" if question else None)
    if not point:
        return None
    evolution_id, candidate = status["evolution_id"], status.get("candidate_version")
    gates = status.get("gates") or []
    canaries = [gate for gate in gates if gate.get("gate") == "canary"]
    marginal = bool(canaries) and canaries[-1].get("verdict") == "marginal"
    kind = ReviewKind.CANARY if question or marginal else ReviewKind.APPROVAL
    if kind is ReviewKind.CANARY:
        title = f"The canary of {candidate} is inconclusive: promote, extend or roll back?"
        last = canaries[-1] if canaries else {}
        plan = dict(question) if question else {
            "sessions_needed": last.get("sessions_needed"), "sessions": last.get("sessions"),
        }  # fmt: skip
        key = f"{evolution_id}:canary"
    else:
        title = f"Approve {candidate} ({status.get('action')}) before the {point}?"
        plan, key = None, f"{evolution_id}:{point}"
    return ReviewDraft(
        agent=agent,
        kind=kind,
        key=key,
        title=title,
        body={
            "reason": status.get("reason"),
            "gates": [
                {"gate": g.get("gate"), "verdict": g.get("verdict"), "reason": g.get("reason")}
                for g in gates
            ],
            "plan": plan,
            "diff": dict(diff) if diff else None,
            "choices": LABELS[kind],
        },
        subject={
            "evolution_id": evolution_id,
            "point": point,
            "candidate_version": candidate,
            "parent_version": status.get("parent_version"),
        },
        evidence=[evolution_id],
    )


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _QUOTED else f"{flat[: _QUOTED - 3]}..."
