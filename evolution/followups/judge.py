"""A judge model's reading of follow-ups, trusted only as far as it agrees with users' scores.

Where an agent names a judge model, it reads each follow-up with the answer before it and
says whether the user is dissatisfied. Like the training judge (`evolution.rl.data.judge`),
it never stands on its word alone: its verdicts are compared with the explicit ratings of
the same answers in the window, and used only when they agree often enough on enough rated
answers; otherwise the offline reading stands, and the report says why. A reply it garbles
counts as a disagreement while agreement is measured, so abstaining cannot pass the gate.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

from evolution.followups.reading import FollowUp

__all__ = [
    "FOLLOW_UP_PROMPT",
    "FollowUpJudge",
    "JudgeReport",
    "follow_up_judge_with",
    "judged_follow_ups",
    "parse_verdict",
]

FOLLOW_UP_PROMPT = """An AI assistant answered a user, and the user wrote back.

<answer>
{answer}
</answer>
<user>
{text}
</user>

Does the user's message say the answer was wrong, incomplete or not what they asked for
(a denial, a correction, asking again or for something the answer left out)? Answer with
JSON only: {{"dissatisfied": true}} or {{"dissatisfied": false}}"""

_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)

# (answer, follow-up) pairs -> one verdict each (None where the judge gave none)
FollowUpJudge = Callable[[Sequence[tuple[str, str]]], list[bool | None]]


def parse_verdict(reply: str) -> bool | None:
    """The judge's verdict in its reply; None when it holds none."""
    for found in _OBJECT.finditer(reply or ""):
        try:
            data = json.loads(found.group(0))
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("dissatisfied"), bool):
            return data["dissatisfied"]
    return None


def follow_up_judge_with(
    complete: Callable[[str], str], *, concurrency: int = 4, limit: int = 400
) -> FollowUpJudge:
    """A judge that asks `complete` about each pair (`concurrency` at once; the newest
    `limit` pairs, the rest keep the offline reading)."""

    def ask(pair: tuple[str, str]) -> bool | None:
        try:
            return parse_verdict(complete(FOLLOW_UP_PROMPT.format(answer=pair[0], text=pair[1])))
        except Exception:  # noqa: BLE001 - a failed call keeps the offline reading
            return None

    def judge(pairs: Sequence[tuple[str, str]]) -> list[bool | None]:
        skipped = max(0, len(pairs) - limit)
        with ThreadPoolExecutor(max(1, concurrency)) as pool:
            read = list(pool.map(ask, pairs[skipped:]))
        return [None] * skipped + read

    return judge


@dataclass(frozen=True)
class JudgeReport:
    """How the judge's verdicts compared with users' ratings, and whether they were used."""

    used: bool
    pairs: int  # follow-ups of rated answers
    agreed: int
    unparsed: int
    reason: str

    @property
    def agreement(self) -> float | None:
        return self.agreed / self.pairs if self.pairs else None


def judged_follow_ups(
    follow_ups: Sequence[FollowUp],
    judge: FollowUpJudge,
    ratings: Mapping[uuid.UUID, float],
    *,
    min_agreement: float = 0.75,
    min_pairs: int = 10,
) -> tuple[list[FollowUp], JudgeReport]:
    """The follow-ups with the judge's verdicts where it is trusted, and the report.

    Args:
        ratings: users' explicit rating of answers, by answer (below 0.5: dissatisfied).
    """
    verdicts = judge([(f.answer, f.text) for f in follow_ups])
    pairs = agreed = unparsed = 0
    for follow_up, verdict in zip(follow_ups, verdicts, strict=True):
        rating = ratings.get(follow_up.answer_id)
        if rating is None:
            continue
        pairs += 1
        unparsed += verdict is None
        agreed += verdict is not None and verdict == (rating < 0.5)
    used, reason = _trusted(pairs, agreed, unparsed, min_agreement, min_pairs)
    report = JudgeReport(used, pairs, agreed, unparsed, reason)
    if not used:
        return list(follow_ups), report
    judged = [
        replace(f, judged=v) if v is not None else f
        for f, v in zip(follow_ups, verdicts, strict=True)
    ]
    return judged, report


def _trusted(
    pairs: int, agreed: int, unparsed: int, min_agreement: float, min_pairs: int
) -> tuple[bool, str]:
    if pairs < min_pairs:
        return False, (
            f"refused: only {pairs} follow-ups of rated answers to measure it on (at least "
            f"{min_pairs} needed); the offline reading stands"
        )
    rate = agreed / pairs
    unread = f"; {unparsed} replies held no verdict" if unparsed else ""
    verdict = "used" if rate >= min_agreement else "refused"
    return rate >= min_agreement, (
        f"{verdict}: it agreed with users' ratings on {rate:.0%} of {pairs} rated follow-ups "
        f"({'at least' if rate >= min_agreement else 'below'} the {min_agreement:.0%} "
        f"required){unread}"
    )
