"""Governance the gateway applies to every ATDP event before it is stored.

`decide_governance` turns a tenant policy and the request's training header into the
event's `Governance`; a `Redactor` then replaces personal data and secrets with placeholders
and records what it found.
"""

from proxy.governance.policy import (
    TRAINING_HEADER,
    decide_governance,
    governance_document,
    parse_training_header,
)
from proxy.governance.redaction import RedactionResult, Redactor

__all__ = [
    "TRAINING_HEADER",
    "RedactionResult",
    "Redactor",
    "decide_governance",
    "governance_document",
    "parse_training_header",
]
