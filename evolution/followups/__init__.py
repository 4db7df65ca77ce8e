"""What users write after an answer, read as evidence without any score, in any language."""

from evolution.followups.judge import (
    FOLLOW_UP_PROMPT,
    FollowUpJudge,
    JudgeReport,
    follow_up_judge_with,
    judged_follow_ups,
    parse_verdict,
)
from evolution.followups.lexicon import LANGUAGES, Cue, cues, fold
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
    "LANGUAGES",
    "Cue",
    "FollowUp",
    "FollowUpJudge",
    "JudgeReport",
    "Signal",
    "Turn",
    "Value",
    "abstracted",
    "asked_for",
    "cues",
    "fold",
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
