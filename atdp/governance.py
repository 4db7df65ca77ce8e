"""Governance and replay class: what may be done with an event, and whether it can be re-run."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import AwareDatetime, Field, model_validator

from atdp._base import ATDPModel, Name, Text

__all__ = [
    "Consent",
    "Governance",
    "RedactionStatus",
    "ReplayClass",
    "ReplayInfo",
    "ReviewStatus",
    "TrainingEligibility",
]


class RedactionStatus(StrEnum):
    """Whether stored text was scanned for personal data and secrets, and what was done."""

    NOT_SCANNED = "not_scanned"
    CLEAN = "clean"  # scanned, nothing found
    REDACTED = "redacted"  # scanned, matches replaced by placeholders


class ReviewStatus(StrEnum):
    UNREVIEWED = "unreviewed"
    APPROVED = "approved"
    FLAGGED = "flagged"
    REJECTED = "rejected"


class TrainingEligibility(StrEnum):
    """What an event may be used for beyond serving the request."""

    ELIGIBLE = "eligible"  # training, evaluation, debugging, audit
    DEBUG_ONLY = "debug_only"  # evaluation and debugging, never training
    AUDIT_ONLY = "audit_only"  # kept for audit; excluded from every learning path


class Consent(StrEnum):
    """The legal basis under which the data was collected (GDPR Art. 6 vocabulary)."""

    CONSENT = "consent"
    CONTRACT = "contract"
    LEGITIMATE_INTEREST = "legitimate_interest"
    LEGAL_OBLIGATION = "legal_obligation"
    NONE = "none"


class Governance(ATDPModel):
    """Data-governance facts carried by every event, decided before it is stored."""

    redaction: RedactionStatus = RedactionStatus.NOT_SCANNED
    redacted_fields: list[Text] = Field(
        default_factory=list, description="JSON paths whose values were redacted."
    )
    labels: list[Name] = Field(
        default_factory=list, description="Classification labels, e.g. 'pii', 'financial'."
    )
    expires_at: AwareDatetime | None = Field(
        default=None, description="When retention ends; `evoplane gc` purges after this."
    )
    consent: Consent = Consent.CONTRACT
    review: ReviewStatus = ReviewStatus.UNREVIEWED
    training: TrainingEligibility = TrainingEligibility.ELIGIBLE
    sealed_ref: Text | None = Field(
        default=None,
        description="Reference to an encrypted raw copy, readable only by permitted jobs.",
    )

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now


class ReplayClass(StrEnum):
    DETERMINISTIC = "deterministic"  # every input recorded; re-running reproduces the call
    APPROXIMATE = "approximate"  # depends on recorded tool outputs that can be substituted
    NON_REPLAYABLE = "non_replayable"  # side effects outside a sandbox


class ReplayInfo(ATDPModel):
    """Whether and how an event can be re-run against another agent version."""

    replay_class: ReplayClass = Field(alias="class")
    reason: Text | None = None

    @model_validator(mode="after")
    def _reason_when_not_deterministic(self) -> ReplayInfo:
        if self.replay_class is not ReplayClass.DETERMINISTIC and not (self.reason or "").strip():
            raise ValueError(f"a reason is required when the replay class is {self.replay_class}")
        return self
