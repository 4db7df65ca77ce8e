"""Which of a version's skills a request gets: lexical retrieval over their descriptions,
within their scope and the set's size budget.

The same BM25 as memory (`runtime.version.bm25`), over each skill's name and
description; the steps are what is injected, not what is matched.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from atdp import Skill, SkillSet
from runtime.version.bm25 import Bm25, subwords, tokenize

__all__ = ["SKILL_BLOCK_END", "SKILL_BLOCK_START", "ScoredSkill", "SkillIndex", "skill_block"]

SKILL_BLOCK_START = "<evoplane-skills>"
SKILL_BLOCK_END = "</evoplane-skills>"
_SKILL_PREAMBLE = "Procedures that apply to this request; follow their steps in order:"


@dataclass(frozen=True)
class ScoredSkill:
    skill: Skill
    score: float


def skill_text(skill: Skill) -> str:
    """How one skill reads in the prompt: its name, purpose, steps and tool-call sketch."""
    lines = [f"## {skill.name}: {skill.description}"]
    lines += [f"{number}. {step}" for number, step in enumerate(skill.steps, 1)]
    if skill.tool_calls:
        calls = " -> ".join(
            f"{call.tool}({', '.join(call.arguments)})" for call in skill.tool_calls
        )
        lines.append(f"Tool calls: {calls}")
    return "\n".join(lines)


def skill_block(hits: list[ScoredSkill]) -> str | None:
    """The system message that carries `hits`, or None for none."""
    if not hits:
        return None
    body = "\n\n".join(skill_text(hit.skill) for hit in hits)
    return f"{SKILL_BLOCK_START}\n{_SKILL_PREAMBLE}\n{body}\n{SKILL_BLOCK_END}"


class SkillIndex:
    """BM25 over a skill set's names and descriptions, built once per version.

    A skill matches a request when its description shares words (else subwords) with the
    request, or when the request names one of the task types the skill is scoped to: the
    agent saying which task it runs is the strongest match there is.
    """

    def __init__(self, skills: SkillSet) -> None:
        self.skills = skills
        texts = [f"{s.name} {s.description}" for s in skills.items]
        self._words = Bm25([tokenize(text) for text in texts], 1.2, 0.75)
        self._subwords = Bm25([subwords(text) for text in texts], 1.2, 0.75)

    def __len__(self) -> int:
        return len(self.skills.items)

    def search(self, query: str, tenant: str | None, task_type: str | None) -> list[ScoredSkill]:
        """The skills to inject, best first: in scope, matched, at most `top_k`, and
        together within `max_chars` (a skill that does not fit is passed over)."""
        chosen: list[ScoredSkill] = []
        room = self.skills.max_chars
        for hit in self._matched(query, task_type):
            size = len(skill_text(hit.skill))
            if size > room or not hit.skill.serves(tenant, task_type):
                continue
            chosen.append(hit)
            room -= size
            if len(chosen) == self.skills.top_k:
                break
        return chosen

    def _matched(self, query: str, task_type: str | None) -> Iterator[ScoredSkill]:
        """Every skill the request matches, best first: those scoped to the task type it
        names (in the set's order), then the others by lexical score."""
        items = self.skills.items
        ranked = self._words.ranked(tokenize(query)) or self._subwords.ranked(subwords(query))
        named = [
            i for i, s in enumerate(items) if task_type is not None and task_type in s.task_types
        ]
        scores = {index: score for score, index in ranked}
        for index in named:
            yield ScoredSkill(items[index], scores.get(index, 0.0))
        named_set = set(named)
        for score, index in ranked:
            if index not in named_set:
                yield ScoredSkill(items[index], score)
