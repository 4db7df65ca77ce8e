"""A relative judge: a model ranks a group of answers to the same task (RULER-style), as a
reward where explicit rewards are sparse.

Scoring answers side by side is easier for a model than scoring one alone, and GRPO needs
only their order within a group. The judge is a callable (`complete(prompt) -> reply`), so
this module does no I/O. It is trusted only as far as it agrees with explicit rewards on
recorded traffic (`agreement`), and never replaces one: `with_explicit` keeps every
explicit reward and fills in only the answers without one.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evolution.rl.samples import RecordedPrompt

__all__ = [
    "RANK_PROMPT",
    "Agreement",
    "RelativeJudge",
    "agreement",
    "parse_scores",
    "with_explicit",
]

RANK_PROMPT = """Several answers were written for the same conversation with an AI agent.
Score how well each one does what the user needs next, from 0 (useless or wrong) to 1
(exactly right), judging them against each other.

<conversation>
{conversation}
</conversation>

{answers}

Reply with JSON only: {{"scores": [one number per answer, in order]}}"""

_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_scores(reply: str, count: int) -> list[float] | None:
    """`count` scores in [0, 1] from a judge's reply; None when it did not give them."""
    found = _OBJECT.search(reply)
    if found is None:
        return None
    try:
        scores = json.loads(found.group(0)).get("scores")
    except (ValueError, AttributeError):
        return None
    if not isinstance(scores, list) or len(scores) != count:
        return None
    if not all(isinstance(s, int | float) and not isinstance(s, bool) for s in scores):
        return None
    if not all(math.isfinite(s) and 0.0 <= s <= 1.0 for s in scores):
        return None
    return [float(s) for s in scores]


class RelativeJudge:
    """Scores a group of answers to one recorded prompt, side by side."""

    def __init__(self, complete: Callable[[str], str], prompt: str = RANK_PROMPT) -> None:
        self.complete, self.prompt = complete, prompt

    def __call__(self, prompt: RecordedPrompt, answers: Sequence[str]) -> list[float] | None:
        """The answers' scores, None when the judge's reply holds none."""
        conversation = "\n".join(
            f"{m.get('role')}: {m.get('content')}"
            for m in prompt.messages
            if isinstance(m.get("content"), str)
        )
        listed = "\n".join(
            f'<answer index="{i + 1}">\n{text}\n</answer>' for i, text in enumerate(answers)
        )
        reply = self.complete(self.prompt.format(conversation=conversation, answers=listed))
        return parse_scores(reply, len(answers))


@dataclass(frozen=True)
class Agreement:
    """How often the judge orders two answers as their explicit rewards do."""

    pairs: int  # pairs of one group whose explicit rewards differ
    concordant: float  # of them, ordered alike (a judge's tie counts half)

    @property
    def rate(self) -> float | None:
        return self.concordant / self.pairs if self.pairs else None


def agreement(
    judged: Sequence[Sequence[float]], explicit: Sequence[Sequence[float | None]]
) -> Agreement:
    """The judge's pairwise agreement with explicit rewards, over groups (each a list of
    answers' scores and their explicit rewards, None where there is none)."""
    pairs, concordant = 0, 0.0
    for scores, rewards in zip(judged, explicit, strict=True):
        rated = [(s, r) for s, r in zip(scores, rewards, strict=True) if r is not None]
        for i, (s1, r1) in enumerate(rated):
            for s2, r2 in rated[i + 1 :]:
                if r1 == r2:
                    continue
                pairs += 1
                same = (s1 - s2) * (r1 - r2)
                concordant += 1.0 if same > 0 else 0.5 if s1 == s2 else 0.0
    return Agreement(pairs=pairs, concordant=concordant)


def with_explicit(
    explicit: Sequence[float | None], judged: Sequence[float] | None
) -> list[float | None]:
    """Each answer's explicit reward, the judge's score only where there is none."""
    if judged is None:
        return list(explicit)
    return [e if e is not None else j for e, j in zip(explicit, judged, strict=True)]
