"""What users write after an answer, read as evidence without any score, in any language
(the words it reads them by: `runtime.lexicon`)."""

from evolution.followups.judge import (
    FOLLOW_UP_PROMPT,
    FollowUpJudge,
    JudgeReport,
    follow_up_judge_with,
    judged_follow_ups,
    parse_verdict,
)
from evolution.followups.reading import (
    ASKING,
    FollowUp,
    Signal,
    Turn,
    read_conversation,
    read_follow_ups,
    signal_counts,
    text_terms,
)
from evolution.followups.values import Value, abstracted, asked_for, placeholder, values

__all__ = [
    "ASKING",
    "FOLLOW_UP_PROMPT",
    "FollowUp",
    "FollowUpJudge",
    "JudgeReport",
    "Signal",
    "Turn",
    "Value",
    "abstracted",
    "asked_for",
    "follow_up_judge_with",
    "judged_follow_ups",
    "parse_verdict",
    "placeholder",
    "read_conversation",
    "read_follow_ups",
    "signal_counts",
    "text_terms",
    "values",
]
