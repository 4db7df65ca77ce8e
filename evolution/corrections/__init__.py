"""Users' corrections: read from a window's signals, classified, and grouped by meaning."""

from evolution.corrections.classify import (
    CorrectionKind,
    category_kind,
    classify,
    specifics,
    tool_words,
)
from evolution.corrections.judge import (
    JUDGE_PROMPT,
    CorrectionJudge,
    JudgeReading,
    judge_with,
    parse_reading,
)
from evolution.corrections.meaning import group_by_meaning, join_nearest, label
from evolution.corrections.window import (
    CorrectionGroup,
    CorrectionRecords,
    UserCorrection,
    conversation_of,
    correction_groups,
    own_values,
    read_corrections,
)

__all__ = [
    "JUDGE_PROMPT",
    "CorrectionGroup",
    "CorrectionJudge",
    "CorrectionKind",
    "CorrectionRecords",
    "JudgeReading",
    "UserCorrection",
    "category_kind",
    "classify",
    "conversation_of",
    "correction_groups",
    "group_by_meaning",
    "join_nearest",
    "judge_with",
    "label",
    "own_values",
    "parse_reading",
    "read_corrections",
    "specifics",
    "tool_words",
]
