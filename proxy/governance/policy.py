"""Governance decisions: what a tenant's policy and a request's headers allow done with an event."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from atdp import Consent, Governance, TrainingEligibility
from registry.tenants import TenantPolicy

__all__ = ["TRAINING_HEADER", "decide_governance", "governance_document", "parse_training_header"]

TRAINING_HEADER = "X-Evoplane-Training"

_OPT_OUT = frozenset({"off", "false", "0", "no"})
_OPT_IN = frozenset({"on", "true", "1", "yes"})
# From least to most restrictive; an opt-out may only move an event to the right.
_STRICTNESS = (
    TrainingEligibility.ELIGIBLE,
    TrainingEligibility.DEBUG_ONLY,
    TrainingEligibility.AUDIT_ONLY,
)


def parse_training_header(value: str | None) -> bool:
    """Whether an `X-Evoplane-Training` header value opts the request out of training.

    Args:
        value: the header value, or None when the header is absent.

    Returns:
        True for off/false/0/no; False for on/true/1/yes or no header (case-insensitive).
    """
    if value is None:
        return False
    word = value.strip().lower()
    if word in _OPT_OUT:
        return True
    if word in _OPT_IN:
        return False
    raise ValueError(
        f"{TRAINING_HEADER}: {value!r} is not understood; send off, false, 0 or no to keep "
        "this request out of training, or on, true, 1 or yes (or omit the header) to follow "
        "the tenant policy"
    )


def _stricter(first: TrainingEligibility, second: TrainingEligibility) -> TrainingEligibility:
    return max(first, second, key=_STRICTNESS.index)


def decide_governance(
    policy: TenantPolicy,
    *,
    training_opt_out: bool,
    now: datetime,
    labels: Iterable[str] = (),
) -> Governance:
    """The governance an event is stored with, before redaction adds its findings.

    Args:
        policy: the tenant's policy (training eligibility, consent basis, retention).
        training_opt_out: the request opted out (`X-Evoplane-Training: off`); the event
            becomes debug_only unless the policy is already stricter.
        now: when the event is captured, timezone-aware; retention counts from here.
        labels: classification labels known up front; stored deduplicated and sorted.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (use atdp.utcnow()) to compute expires_at")
    training = policy.training
    if training_opt_out:
        training = _stricter(training, TrainingEligibility.DEBUG_ONLY)
    expires_at = None
    if policy.retention_days is not None:
        expires_at = now + timedelta(days=policy.retention_days)
    return Governance(
        training=training,
        consent=policy.consent,
        expires_at=expires_at,
        labels=sorted(set(labels)),
    )


def governance_document(
    policy: TenantPolicy, *, training_opt_out: bool, now: datetime
) -> dict[str, Any]:
    """`decide_governance`'s answer as the JSON document the gateway's capture stores.

    The gateway decides this for every request; building and dumping the model each time
    was a measurable share of its CPU per request, and only `expires_at` depends on the
    time, so the rest is built once per distinct decision.
    """
    undated = _undated_document(policy.training, policy.consent, training_opt_out)
    document = {key: list(v) if isinstance(v, list) else v for key, v in undated.items()}
    if policy.retention_days is not None:
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware (use atdp.utcnow()) for expires_at")
        document["expires_at"] = (now + timedelta(days=policy.retention_days)).isoformat()
    return document


@lru_cache(maxsize=64)
def _undated_document(
    training: TrainingEligibility, consent: Consent, training_opt_out: bool
) -> dict[str, Any]:
    """The document for a policy without retention (shared: `governance_document` copies it)."""
    policy = TenantPolicy(training=training, consent=consent)
    now = datetime.now().astimezone()
    return decide_governance(policy, training_opt_out=training_opt_out, now=now).model_dump(
        mode="json"
    )
