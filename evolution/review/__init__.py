"""The review queue's plain logic: what a person should judge, and what a label becomes.

Producers turn what the control plane could not decide alone into `ReviewDraft`s
(`drafts`); a label is checked and turned into rewards, evaluation cases or a workflow
update (`labels`). The registry keeps the queue (`registry.review`); activities and the
control API do the I/O.
"""

from evolution.review.drafts import (
    awaiting_draft,
    correction_drafts,
    finding_drafts,
    is_unsure,
)
from evolution.review.labels import (
    LABELS,
    LabelEffects,
    LabelError,
    check_label,
    label_effects,
)
from evolution.review.settings import ReviewSettings

__all__ = [
    "LABELS",
    "LabelEffects",
    "LabelError",
    "ReviewSettings",
    "awaiting_draft",
    "check_label",
    "correction_drafts",
    "finding_drafts",
    "is_unsure",
    "label_effects",
]
