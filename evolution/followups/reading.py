"""What a user's next message says about the answer before it, read without any score.

Each follow-up (a user message that answers an agent's answer) is read for signals:

- structural, needing no words: it states a value that contradicts the answer (same kind
  and unit, another value: "30 kg" after "20 kg"); it restates a value the conversation
  held before the answer and the answer left out (the answer should have given it); it
  repeats or re-asks the session's first request; the agent's reply to it retracts the
  answer ("you're right, ..."), or gives back what the user had said before and the answer
  left out (the user had to ask for it: `elicited`); the session runs longer than its task
  type usually does;
- lexical, in the lexicon's 26 languages (`runtime.lexicon`): a denial, an
  "again / repeat / confirm", an instruction about answers; thanks.

Strong signals read as dissatisfaction on their own; weak ones (a question on the same
topic, a long session) only together. Plain functions over plain values: the window
analysis hands in each trajectory's conversation.
"""

from __future__ import annotations

import re
import statistics
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from evolution.followups.values import Value, values
from runtime.lexicon import Cue, cues, fold

__all__ = [
    "ASKING",
    "FollowUp",
    "Signal",
    "Turn",
    "read_conversation",
    "read_follow_ups",
    "signal_counts",
    "text_terms",
]


class Signal(StrEnum):
    DENIAL = "denial"
    AGAIN = "again"
    INSTRUCTION = "instruction"
    CONTRADICTION = "contradiction"
    OMITTED = "omitted"
    REASK = "reask"
    RETRACTION = "retraction"
    ELICITED = "elicited"
    TOPIC_QUESTION = "topic_question"
    LONG_SESSION = "long_session"
    THANKS = "thanks"


STRONG = frozenset(
    {
        Signal.DENIAL,
        Signal.AGAIN,
        Signal.INSTRUCTION,
        Signal.CONTRADICTION,
        Signal.OMITTED,
        Signal.REASK,
        Signal.RETRACTION,
        Signal.ELICITED,
    }
)
WEAK = frozenset({Signal.TOPIC_QUESTION, Signal.LONG_SESSION})
# Signals of a user asking for something the answer did not give.
ASKING = frozenset(
    {Signal.AGAIN, Signal.OMITTED, Signal.REASK, Signal.TOPIC_QUESTION, Signal.ELICITED}
)

_LEXICAL = frozenset({Signal.DENIAL, Signal.AGAIN, Signal.INSTRUCTION, Signal.THANKS})
_QUESTION = re.compile(r"[?？؟]\s*$|^\s*¿")
_TERM = re.compile(r"[^\W\d_]+")
_UNSPACED = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e00-\u0e7f]+")
# The share of a follow-up's terms found in the first request for it to re-ask it.
_REASK_OVERLAP = 0.6
# A session is long when it has this many more user turns than its task type's median.
_LONG_BY = 2


@dataclass(frozen=True)
class Turn:
    """One message of a conversation: a user's, or the agent's answer (an llm call).

    Args:
        parent_id: for a user message, the answer it follows (None for the first); for an
            answer, the event it answers.
    """

    event_id: uuid.UUID
    trajectory_id: uuid.UUID
    seq: int
    speaker: str  # "user" or "agent"
    text: str
    parent_id: uuid.UUID | None = None


@dataclass(frozen=True)
class FollowUp:
    """One follow-up, read: the answer it follows, the signals found, the verdict."""

    event_id: uuid.UUID
    trajectory_id: uuid.UUID
    answer_id: uuid.UUID
    text: str
    answer: str
    signals: frozenset[Signal] = field(default_factory=frozenset)
    judged: bool | None = None  # a trusted judge model's verdict, where it gave one
    # The kinds of the values the agent's reply gave back once asked ("date", "time").
    elicited: tuple[str, ...] = ()

    @property
    def dissatisfied(self) -> bool:
        if self.judged is not None:
            return self.judged
        return bool(self.signals & STRONG) or len(self.signals & WEAK) >= 2

    @property
    def satisfied(self) -> bool:
        return Signal.THANKS in self.signals and not self.dissatisfied

    @property
    def asks(self) -> bool:
        """It asks for something the answer left out (rather than correcting it)."""
        return bool(self.signals & ASKING) and not self.signals & {
            Signal.DENIAL,
            Signal.CONTRADICTION,
        }


def text_terms(text: str) -> set[str]:
    """A text's terms: folded words of three letters or more, and for scripts written
    without spaces, their character pairs."""
    folded = fold(text)
    found = {word for word in _TERM.findall(_UNSPACED.sub(" ", folded)) if len(word) > 2}
    for run in _UNSPACED.findall(folded):
        found |= {run[i : i + 2] for i in range(len(run) - 1)} or {run}
    return found


def read_conversation(turns: Sequence[Turn], long_session: bool = False) -> list[FollowUp]:
    """Every follow-up of one trajectory's conversation (its turns in order), read."""
    ordered = sorted(turns, key=lambda t: t.seq)
    answers = {t.event_id: t for t in ordered if t.speaker == "agent"}
    said: list[Turn] = []
    found = []
    for index, turn in enumerate(ordered):
        if turn.speaker != "user":
            continue
        answer = answers.get(turn.parent_id) if turn.parent_id else None
        if answer is not None and said:
            reply = _reply(ordered[index + 1 :])
            signals = _signals(turn, answer, said, reply)
            elicited = _elicited(answer, said, reply)
            if elicited:
                signals.add(Signal.ELICITED)
            if long_session:
                signals.add(Signal.LONG_SESSION)
            found.append(
                FollowUp(
                    turn.event_id, turn.trajectory_id, answer.event_id, turn.text,
                    answer.text, frozenset(signals), elicited=elicited,
                )
            )  # fmt: skip
        said.append(turn)
    return found


def _reply(rest: Sequence[Turn]) -> Turn | None:
    """The agent's first answer in words after a user's message (before the next one)."""
    for turn in rest:
        if turn.speaker == "user":
            return None
        if turn.text.strip():
            return turn
    return None


def _elicited(answer: Turn, said: Sequence[Turn], reply: Turn | None) -> tuple[str, ...]:
    """The kinds of the values the reply gives back from what the user said before, which
    the answer left out: the user had to ask for them."""
    if reply is None:
        return ()
    before = {v.norm for turn in said for v in values(turn.text)}
    answered = {v.norm for v in values(answer.text)}
    kinds = [v.kind for v in values(reply.text) if v.norm in before and v.norm not in answered]
    return tuple(dict.fromkeys(kinds))


def read_follow_ups(
    turns: Iterable[Turn], task_types: Mapping[uuid.UUID, str] | None = None
) -> list[FollowUp]:
    """Every follow-up of a window's conversations, read; a trajectory with more user turns
    than its task type's median (by `_LONG_BY`) marks its follow-ups as a long session."""
    by_trajectory: dict[uuid.UUID, list[Turn]] = defaultdict(list)
    for turn in turns:
        by_trajectory[turn.trajectory_id].append(turn)
    long = _long_sessions(by_trajectory, task_types or {})
    return [
        follow_up
        for trajectory, conversation in by_trajectory.items()
        for follow_up in read_conversation(conversation, trajectory in long)
    ]


def _long_sessions(
    conversations: Mapping[uuid.UUID, list[Turn]], task_types: Mapping[uuid.UUID, str]
) -> set[uuid.UUID]:
    counts = {t: sum(turn.speaker == "user" for turn in c) for t, c in conversations.items()}
    by_type: dict[str, list[int]] = defaultdict(list)
    for trajectory, count in counts.items():
        by_type[task_types.get(trajectory, "")].append(count)
    usual = {kind: statistics.median(found) for kind, found in by_type.items() if len(found) >= 5}
    return {
        trajectory
        for trajectory, count in counts.items()
        if (kind := task_types.get(trajectory, "")) in usual and count >= usual[kind] + _LONG_BY
    }


def _signals(turn: Turn, answer: Turn, said: Sequence[Turn], reply: Turn | None) -> set[Signal]:
    lexical = cues(turn.text)
    found = {Signal(cue.value) for cue in lexical if cue.value in _LEXICAL}
    question = bool(_QUESTION.search(turn.text))
    stated, answered = values(turn.text), values(answer.text)
    earlier = [value for before in said for value in values(before.text)]
    if not question and _contradicts(stated, answered):
        found.add(Signal.CONTRADICTION)
    if _left_out(stated, earlier, answer.text):
        found.add(Signal.OMITTED)
    opening = said[0].text
    if _reasks(turn.text, opening):
        found.add(Signal.REASK)
    if reply is not None and Cue.RETRACTION in cues(reply.text):
        found.add(Signal.RETRACTION)
    if question and text_terms(turn.text) & (text_terms(opening) | text_terms(answer.text)):
        found.add(Signal.TOPIC_QUESTION)
    return found


def _contradicts(stated: Sequence[Value], answered: Sequence[Value]) -> bool:
    """A value of the follow-up has the kind and unit of one in the answer, and the answer
    says another value of that kind and unit, never this one."""
    said = {(v.kind, v.unit, v.norm) for v in answered}
    for value in stated:
        same_kind = {norm for kind, unit, norm in said if (kind, unit) == (value.kind, value.unit)}
        if same_kind and value.norm not in same_kind:
            return True
    return False


def _left_out(stated: Sequence[Value], earlier: Sequence[Value], answer: str) -> bool:
    """The follow-up restates a value the conversation held before the answer, which the
    answer did not state: the answer should have given it back."""
    before = {v.norm for v in earlier}
    in_answer = {v.norm for v in values(answer)}
    folded = fold(answer)
    return any(
        v.norm in before and v.norm not in in_answer and fold(v.text) not in folded for v in stated
    )


def _reasks(text: str, opening: str) -> bool:
    """The follow-up says again what the first request said: most of its terms are the
    first request's (and it says enough to be a request)."""
    if fold(text).strip() == fold(opening).strip():
        return True
    terms, first = text_terms(text), text_terms(opening)
    return len(terms) >= 3 and len(terms & first) / len(terms) >= _REASK_OVERLAP


def signal_counts(follow_ups: Iterable[FollowUp]) -> dict[str, int]:
    """How often each signal was read among the dissatisfied follow-ups."""
    counted: Counter[str] = Counter()
    for follow_up in follow_ups:
        if follow_up.dissatisfied:
            counted.update(str(signal) for signal in follow_up.signals)
    return dict(sorted(counted.items()))
