"""A relative judge: a model ranks a group of answers to the same task (RULER-style), as a
reward where explicit rewards are sparse.

Scoring answers side by side is easier for a model than scoring one alone, and GRPO needs
only their order within a group. The judge is a callable (`complete(prompt) -> reply`), so
this module does no I/O. It is trusted only as far as it agrees with explicit rewards on
recorded traffic (`measure_agreement` on `answer_groups`, gated by `trusted`), and never
replaces one: `with_explicit` keeps every explicit reward and fills in only the answers
without one (`JudgedReward`, GRPO's reward where a prompt has no rewarded reference).

A reply the judge's scores cannot be read from counts as **disagreement** while agreement is
measured (every rated pair of that group is discordant, so a judge that cannot answer cannot
pass the threshold by abstaining) and as **abstention** in training (the answers it did not
score get the group's explicit mean, or 0 where there is none: no signal).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evolution.rl.data.text import completion_text
from evolution.rl.rewards import RewardFunction
from evolution.rl.samples import RecordedPrompt, record_prompts

__all__ = [
    "RANK_PROMPT",
    "Agreement",
    "AnswerGroup",
    "JudgedReward",
    "RelativeJudge",
    "agreement",
    "answer_groups",
    "measure_agreement",
    "parse_scores",
    "trusted",
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
    unparsed: int = 0  # groups whose reply held no scores (their pairs count as discordant)

    @property
    def rate(self) -> float | None:
        return self.concordant / self.pairs if self.pairs else None


def agreement(
    judged: Sequence[Sequence[float] | None], explicit: Sequence[Sequence[float | None]]
) -> Agreement:
    """The judge's pairwise agreement with explicit rewards, over groups (each a list of
    answers' scores, None where the reply held none, and their explicit rewards, None where
    there is none)."""
    pairs, concordant, unparsed = 0, 0.0, 0
    for scores, rewards in zip(judged, explicit, strict=True):
        if scores is None:
            unparsed += 1
            rated_rewards = [r for r in rewards if r is not None]
            pairs += sum(
                1 for i, r1 in enumerate(rated_rewards) for r2 in rated_rewards[i + 1 :] if r1 != r2
            )
            continue
        rated = [(s, r) for s, r in zip(scores, rewards, strict=True) if r is not None]
        for i, (s1, r1) in enumerate(rated):
            for s2, r2 in rated[i + 1 :]:
                if r1 == r2:
                    continue
                pairs += 1
                same = (s1 - s2) * (r1 - r2)
                concordant += 1.0 if same > 0 else 0.5 if s1 == s2 else 0.0
    return Agreement(pairs=pairs, concordant=concordant, unparsed=unparsed)


def with_explicit(
    explicit: Sequence[float | None], judged: Sequence[float] | None
) -> list[float | None]:
    """Each answer's explicit reward, the judge's score only where there is none."""
    if judged is None:
        return list(explicit)
    return [e if e is not None else j for e, j in zip(explicit, judged, strict=True)]


@dataclass(frozen=True)
class AnswerGroup:
    """Recorded answers to one request (the same messages and tools), with their explicit
    rewards."""

    prompt: RecordedPrompt
    answers: list[str]
    rewards: list[float | None]


def answer_groups(
    records: Sequence[dict[str, Any]], *, size: int = 4, limit: int = 50
) -> list[AnswerGroup]:
    """The training export's answers grouped by the request they answered (at most `size`
    to a group, in recorded order, as a judge reads a handful side by side), where at least
    two have different explicit rewards (the only groups agreement can be read from); at
    most `limit`, the largest first."""
    by_request: dict[str, AnswerGroup] = {}
    for record in records:
        for step, prompt in zip(record["steps"], record_prompts(record), strict=True):
            key = json.dumps([prompt.messages, prompt.tools], sort_keys=True)
            group = by_request.setdefault(key, AnswerGroup(prompt, [], []))
            group.answers.append(completion_text(step["completion"]))
            group.rewards.append(step["reward"])
    groups = [
        AnswerGroup(g.prompt, g.answers[i : i + size], g.rewards[i : i + size])
        for g in by_request.values()
        for i in range(0, len(g.answers), size)
    ]
    rated = [g for g in groups if len({r for r in g.rewards if r is not None}) > 1]
    return sorted(rated, key=lambda g: -len(g.answers))[:limit]


def measure_agreement(judge: RelativeJudge, groups: Sequence[AnswerGroup]) -> Agreement:
    """The judge's agreement with the explicit rewards of recorded answer groups."""
    judged = [judge(g.prompt, g.answers) for g in groups]
    return agreement(judged, [g.rewards for g in groups])


def trusted(found: Agreement, min_agreement: float, min_pairs: int) -> tuple[bool, str]:
    """Whether a judge's measured agreement lets it reward, and why (in words)."""
    if found.pairs < min_pairs:
        return False, (
            f"only {found.pairs} recorded pairs with different explicit rewards to measure it "
            f"on (at least {min_pairs} needed)"
        )
    rate = found.rate or 0.0
    unread = f"; {found.unparsed} replies held no scores" if found.unparsed else ""
    verdict = "at least" if rate >= min_agreement else "below"
    return rate >= min_agreement, (
        f"it ordered {rate:.0%} of {found.pairs} recorded pairs as their explicit rewards do, "
        f"{verdict} the {min_agreement:.0%} required{unread}"
    )


class JudgedReward:
    """GRPO's group reward with a trusted judge: the explicit (verifiable) reward wherever a
    prompt has a rewarded reference or an answer was rated, the judge's score elsewhere."""

    def __init__(self, explicit: RewardFunction, judge: RelativeJudge) -> None:
        self.explicit, self.judge = explicit, judge
        self.judged_groups = self.abstained = 0

    def __call__(self, prompt: RecordedPrompt, text: str) -> float:
        return self.explicit(prompt, text)

    def score_group(
        self, prompt: RecordedPrompt, texts: Sequence[str], rated: Sequence[float | None]
    ) -> list[float]:
        """Each text's reward; `rated` holds the explicit rewards recorded for some texts."""
        explicit = [
            self.explicit(prompt, t) if prompt.reference else r
            for t, r in zip(texts, rated, strict=True)
        ]
        if all(e is not None for e in explicit):
            return [float(e) for e in explicit if e is not None]
        scores = self.judge(prompt, texts)
        self.judged_groups += 1
        self.abstained += scores is None
        combined = with_explicit(explicit, scores)
        known = [c for c in combined if c is not None]
        neutral = sum(known) / len(known) if known else 0.0
        return [neutral if c is None else float(c) for c in combined]


def judge_reward(
    judge: RelativeJudge,
    records: Sequence[dict[str, Any]],
    explicit: RewardFunction,
    unreferenced: int,
    *,
    min_agreement: float,
    min_pairs: int,
    max_groups: int = 50,
) -> tuple[RewardFunction, dict[str, Any]]:
    """GRPO's reward for a job with `unreferenced` training prompts (no rewarded reference):
    a `JudgedReward` when the judge's agreement on the recorded answer groups of `records`
    passes, else `explicit` alone; and a report of what was measured and decided."""
    if not unreferenced:
        return explicit, {
            "used": False,
            "reason": "every training prompt has a rewarded reference: nothing to judge",
        }
    found = measure_agreement(judge, answer_groups(records, limit=max_groups))
    ok, why = trusted(found, min_agreement, min_pairs)
    report = {
        "used": ok,
        "agreement": found.rate,
        "pairs": found.pairs,
        "unparsed": found.unparsed,
        "min_agreement": min_agreement,
        "reason": f"{'used' if ok else 'refused'} on {unreferenced} prompts without a "
        f"rewarded reference: {why}",
    }
    return (JudgedReward(explicit, judge) if ok else explicit), report
