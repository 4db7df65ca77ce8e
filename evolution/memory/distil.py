"""Distil memory facts from user corrections: pure functions, no I/O, no LLM.

A correction ("No, the refund window is 30 days, not 14.") becomes a short, self-contained
fact ("The refund window is 30 days, not 14."). Corrections that state the same fact merge
into one `DistilledFact`; its scope is the tenant that supplied it, or every tenant of the
agent when several tenants supplied it. Two facts on one topic with different values
contradict each other: `relation` says which, so the operator can flag rather than choose.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from evolution.corrections import UserCorrection, specifics
from evolution.corrections.meaning import terms
from evolution.memory.topic import topic
from registry.memory import memory_key

__all__ = [
    "DistilledFact",
    "FactRelation",
    "confidence",
    "distil_facts",
    "fact_text",
    "facts_supplied",
    "reinforced_confidence",
    "relation",
    "scopes_overlap",
    "states_fact",
]

# Lead-ins that carry no fact: greetings and the words users correct with. Strippable
# anywhere before the fact; "no"/"wrong"/... only when punctuated, since "No returns are
# accepted after 30 days" is itself a fact.
_LEAD_IN = re.compile(
    r"^\s*(?:(?:hi|hello|hey|thanks|thank you|sorry|ok|okay|actually|fyi|just so you know"
    r"|to be clear|please note|note|i said|i meant|you got it wrong|you misunderstood"
    r"|that'?s (?:not (?:right|correct|true|it|what i (?:asked|meant|wanted))|wrong|incorrect)"
    r"|not what i (?:asked|meant|wanted)|try again)\b[\s,.:;!-]*"
    r"|(?:no|nope|nah|wrong|incorrect|nein|falsch|non|faux|incorrecto|nee|fout|sbagliato)"
    r"\s*[,.:;!-]+\s*)",
    re.IGNORECASE,
)
_THAT = re.compile(r"^that\s+", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NEGATED = re.compile(r"\b(?:not|never|instead of|rather than|no longer)\s+\S+", re.IGNORECASE)
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)?")
_MAX_CHARS = 280
_MIN_WORDS = 3
# Without a number to compare, two statements of one fact must share most of their words.
_SAME_WORDS = 0.8
# Each independent session that supplies a fact halves the doubt about it.
_DOUBT_PER_SESSION = 0.5
_MAX_CONFIDENCE = 0.99


@dataclass
class DistilledFact:
    """A fact and every correction that supplied it."""

    content: str
    corrections: list[UserCorrection] = field(default_factory=list)

    @property
    def topic(self) -> str:
        return topic(self.content)

    @property
    def tenant(self) -> str | None:
        """The supplying tenant, or None (agent-wide) when several tenants supplied it."""
        tenants = {c.tenant for c in self.corrections}
        return next(iter(tenants)) if len(tenants) == 1 else None

    @property
    def sources(self) -> list[str]:
        return list(dict.fromkeys(c.source for c in self.corrections))

    @property
    def sessions(self) -> int:
        return len({(c.tenant, c.session) for c in self.corrections})

    @property
    def confidence(self) -> float:
        return confidence(self.sessions)


class FactRelation(StrEnum):
    SAME = "same"  # one fact, stated twice: merge
    CONFLICT = "conflict"  # one topic, different values: flag
    UNRELATED = "unrelated"


def fact_text(text: str) -> str | None:
    """The fact a correction states, short and self-contained; None if it states none.

    Lead-ins ("No,", "Actually", greetings) and questions are dropped: a memory item is
    read out of context, where "No, it's 30 days" or "can you check?" mean nothing.
    """
    sentences = [_statement(s) for s in _SENTENCE.split(" ".join(text.split()))]
    kept: list[str] = []
    for sentence in filter(None, sentences):
        if len(" ".join([*kept, sentence])) > _MAX_CHARS:
            break
        kept.append(sentence)
    if not kept:
        return None
    fact = " ".join(kept)
    return fact if fact[-1] in ".!" else f"{fact}."


def facts_supplied(corrections: Iterable[UserCorrection]) -> dict[uuid.UUID, list[str]]:
    """The facts users supplied in each trajectory, once each, in the order said: what a
    replayed or optimised answer to it should now state."""
    facts: dict[uuid.UUID, list[str]] = {}
    for correction in corrections:
        fact = fact_text(correction.text) if correction.supplies_fact else None
        if fact and fact not in facts.setdefault(correction.trajectory_id, []):
            facts[correction.trajectory_id].append(fact)
    return {trajectory: found for trajectory, found in facts.items() if found}


def _statement(sentence: str) -> str | None:
    """One declarative sentence without its lead-in, capitalised; None for anything else."""
    previous = None
    while previous != sentence:
        previous, sentence = sentence, _THAT.sub("", _LEAD_IN.sub("", sentence, count=1))
    sentence = sentence.strip()
    if sentence.endswith("?") or len(memory_key(sentence).split()) < _MIN_WORDS:
        return None
    return sentence[0].upper() + sentence[1:]


def confidence(sessions: int) -> float:
    """Confidence from the number of independent sessions that supplied a fact."""
    return round(min(_MAX_CONFIDENCE, 1.0 - _DOUBT_PER_SESSION**sessions), 4)


def reinforced_confidence(current: float, added_sessions: int) -> float:
    """An item's confidence after `added_sessions` more sessions supplied it."""
    doubt = (1.0 - current) * _DOUBT_PER_SESSION**added_sessions
    return round(max(current, min(_MAX_CONFIDENCE, 1.0 - doubt)), 4)


def relation(first: str, second: str) -> FactRelation:
    """Whether two facts are the same fact, contradict each other, or are unrelated.

    Same topic, same asserted numbers (or, without numbers, nearly the same words): the
    same fact. Same topic otherwise: a conflict ("within 30 days" vs "within 14 days").
    Numbers after "not" are what the fact denies, so "30 days, not 14" asserts only 30.
    """
    if memory_key(first) == memory_key(second):
        return FactRelation.SAME
    if topic(first) != topic(second):
        return FactRelation.UNRELATED
    numbers = _asserted_numbers(first), _asserted_numbers(second)
    if any(numbers):
        return FactRelation.SAME if numbers[0] == numbers[1] else FactRelation.CONFLICT
    words = set(memory_key(first).split()), set(memory_key(second).split())
    overlap = len(words[0] & words[1]) / len(words[0] | words[1])
    return FactRelation.SAME if overlap >= _SAME_WORDS else FactRelation.CONFLICT


def _asserted_numbers(text: str) -> frozenset[str]:
    return frozenset(_NUMBER.findall(_NEGATED.sub(" ", text)))


def scopes_overlap(first: str | None, second: str | None) -> bool:
    """Whether some tenant sees items of both scopes (None: every tenant)."""
    return first is None or second is None or first == second


def distil_facts(corrections: Iterable[UserCorrection]) -> list[DistilledFact]:
    """Group corrections into facts, oldest first; each fact keeps its first wording.

    Corrections that state no fact (questions, bare "no, that's wrong") are skipped.
    """
    facts: list[DistilledFact] = []
    for correction in sorted(corrections, key=lambda c: (c.at, c.source)):
        content = fact_text(correction.text)
        if content is None:
            continue
        fact = _same_fact(facts, content) or _new_fact(facts, content)
        fact.corrections.append(correction)
    return facts


def _same_fact(facts: Sequence[DistilledFact], content: str) -> DistilledFact | None:
    return next((f for f in facts if relation(f.content, content) is FactRelation.SAME), None)


def _new_fact(facts: list[DistilledFact], content: str) -> DistilledFact:
    facts.append(DistilledFact(content))
    return facts[-1]


# Without a value to check, an answer states a fact when it has most of the fact's words.
_STATED_WORDS = 0.6


def states_fact(answer: str, fact: str) -> bool:
    """Whether `answer` states `fact`, however it is worded.

    A fact that carries values ("8 hours", "vpn.example.net") is stated when the answer
    gives every value it asserts (in any wording, any language around them); a fact
    without values when the answer has most of its content words.
    """
    values = specifics(fact)
    if values:
        return values <= specifics(answer)
    wanted = set(terms(fact))
    if not wanted:
        return False
    return len(wanted & set(terms(answer))) >= _STATED_WORDS * len(wanted)
