"""Reading corrections with a judge model, when an agent has one configured.

The offline reading (`classify`, `group_by_meaning`) looks at the shape of the words; a
model reads what they mean, in any language: what kind of correction it is, and what it
is about in a few English words, which is what corrections are then grouped by. The
judge is a callable (`complete(prompt) -> reply`), so this module stays free of I/O: the
activity that analyses a window wires it to the gateway as evaluation traffic. A reply the
judge garbles, or a call that fails, falls back to the offline reading of that correction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from evolution.corrections.classify import CorrectionKind
from evolution.followups.judge import FollowUpJudge, follow_up_judge_with

__all__ = ["JUDGE_PROMPT", "CorrectionJudge", "JudgeReading", "judge_with", "parse_reading"]

JUDGE_PROMPT = """A user of an AI assistant wrote this after one of its answers:

<correction>
{text}
</correction>

What is the user correcting? Answer with JSON only, like
{{"kind": "missing_fact", "about": "baggage allowance"}}
where "kind" is one of:
- "missing_fact": the user states a fact the assistant did not know or got wrong;
- "instruction": the user asks the assistant to answer differently (format, length,
  language, what to include or confirm, a policy to follow);
- "tool_use": the assistant used the wrong tool, or a tool wrongly;
- "other": none of these (a complaint that something did not work, a new request).
and "about" names what it concerns in two to five English words."""

_KINDS = {kind.value: kind for kind in CorrectionKind}
_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)
_ABOUT_WORDS = 8


@dataclass(frozen=True)
class JudgeReading:
    """What the judge read in one correction."""

    kind: CorrectionKind
    about: str


# texts -> one reading per text (None where the judge gave none)
CorrectionJudge = Callable[[Sequence[str]], list[JudgeReading | None]]


def parse_reading(reply: str) -> JudgeReading | None:
    """The judge's reading in its reply; None when the reply holds no valid one."""
    for found in _OBJECT.finditer(reply or ""):
        try:
            data = json.loads(found.group(0))
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        kind = _KINDS.get(str(data.get("kind", "")).strip().lower())
        about = " ".join(str(data.get("about") or "").split()[:_ABOUT_WORDS])
        if kind is not None:
            return JudgeReading(kind, about)
    return None


class _ModelJudge:
    """A judge model's two readings: corrections (called) and follow-ups (`follow_ups`)."""

    def __init__(self, judge: CorrectionJudge, follow_ups: FollowUpJudge) -> None:
        self.judge, self.follow_ups = judge, follow_ups

    def __call__(self, texts: Sequence[str]) -> list[JudgeReading | None]:
        return self.judge(texts)


def judge_with(
    complete: Callable[[str], str], *, concurrency: int = 4, limit: int = 400
) -> CorrectionJudge:
    """A judge that asks `complete` about each text (`concurrency` at once); its
    `follow_ups` reads follow-ups with the same model (`evolution.followups.judge`).

    Args:
        limit: at most this many texts are judged (the newest, the end of the list); the
            rest keep the offline reading, so a huge window costs a bounded number of calls.
    """
    follow_ups = follow_up_judge_with(complete, concurrency=concurrency, limit=limit)
    return _ModelJudge(_correction_judge(complete, concurrency, limit), follow_ups)


def _correction_judge(
    complete: Callable[[str], str], concurrency: int, limit: int
) -> CorrectionJudge:

    def ask(text: str) -> JudgeReading | None:
        try:
            return parse_reading(complete(JUDGE_PROMPT.format(text=text)))
        except Exception:  # noqa: BLE001 - a failed call falls back to the offline reading
            return None

    def judge(texts: Sequence[str]) -> list[JudgeReading | None]:
        skipped = max(0, len(texts) - limit)
        with ThreadPoolExecutor(max(1, concurrency)) as pool:
            read = list(pool.map(ask, texts[skipped:]))
        return [None] * skipped + read

    return judge
