"""Every correction users gave in a window of traffic, from the signals they really send.

Users say an answer was wrong in many ways: a thumb or a score, a category from a widget, a
correction box, or just their next message. A correction is the text that says *what* was
wrong, wherever it came from:

- the words of a feedback report (its correction, or its critique when the report rates
  the answer down or names a category);
- the user's next message after an answer judged wrong: by the gateway's next-turn signal,
  an explicit rating of that answer, the follow-up reading (`evolution.followups`: what
  the message itself says, in any language, with no score at all), or, when feedback or a
  failed outcome names only the trajectory, after any answer of that trajectory. A message
  that only denies ("Das stimmt nicht.") is read with the user's next one, as one
  correction.

Values one session alone states (a user's own reference, date or amount) are the user's,
not a fact: they are abstracted to their kind before a correction is classified and
grouped, so requests that differ only in them are one request (`own_values`). A follow-up
that asks for what the answer left out is an instruction the answers lacked.

Each is classified (`classify`) and, in `correction_groups`, grouped by kind and meaning.
Texts are the stored ones: the gateway has already redacted them.
"""

from __future__ import annotations

import math
import re
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from atdp import Reward, RewardSource
from evolution.corrections.classify import CorrectionKind, category_kind, classify, specifics
from evolution.corrections.judge import CorrectionJudge
from evolution.corrections.meaning import (
    asked_note,
    group_by_meaning,
    join_nearest,
    label,
    terms,
)
from evolution.corrections.reviewed import apply_reviews
from evolution.followups import FollowUp, Turn, placeholder, read_follow_ups, values
from registry import ConversationTurn, UserTurn, WindowTrajectory
from runtime.lexicon import Cue, cues

__all__ = [
    "CorrectionGroup",
    "CorrectionRecords",
    "UserCorrection",
    "conversation_of",
    "correction_groups",
    "own_values",
    "read_corrections",
]

# The reward names the gateway records for corrections (proxy.signals, proxy.feedback,
# /v1/events task outcomes).
_IMPLICIT_CORRECTION = "user_accepted"
_EXPLICIT_CORRECTION = "correction"
_TASK_SUCCESS = "task_success"
_FAILED_STATUSES = frozenset({"failure", "error", "abandoned"})
# The most recent corrections of one kind that are grouped with one another (the cost grows
# with the square of the count); each older one then joins the group it is most like
# (`join_nearest`), and those like none are grouped among themselves (again the most recent
# MAX_GROUPED of them).
MAX_GROUPED = 600
# A value stated in the corrections of fewer sessions than this share of the sessions whose
# corrections state values (and never fewer than _SHARED_MIN) is one user's own.
_SHARED_SHARE = 0.1
_SHARED_MIN = 3
_SHARED_MIN_SESSIONS = 5


@dataclass(frozen=True)
class UserCorrection:
    """What one user said was wrong, and where.

    Args:
        answer: the llm call it corrects, when known (None: the trajectory as a whole).
        source: provenance: the event holding the words (the user's message), the answer a
            feedback report names, or `reward:<id>` for feedback on a whole trajectory.
        category: the feedback category the user picked with it, if any.
    """

    text: str
    kind: CorrectionKind
    tenant: str
    session: str
    trajectory_id: uuid.UUID
    source: str
    at: datetime
    answer: uuid.UUID | None = None
    category: str | None = None
    about: str | None = None  # what a judge model said it is about, in a few words
    own: frozenset[str] = frozenset()  # values of the text that are the user's own
    asks: bool = False  # a follow-up asking for what the answer left out
    elicited: tuple[str, ...] = ()  # the kinds of values the agent gave once asked

    @property
    def supplies_fact(self) -> bool:
        """It gives the agent a fact: a missing fact, or anything that asserts a value (a
        policy the user reported with its terms, "invoices within 30 days", say); never a
        user's own values."""
        if self.kind is CorrectionKind.INSTRUCTION and self.own:
            return False
        return self.kind is CorrectionKind.MISSING_FACT or bool(specifics(self.text) - self.own)

    @property
    def request(self) -> str:
        """What it asks for, its own values written as their kind ("⟨code⟩")."""
        return abstract(self.text, self.own)

    @property
    def meaning(self) -> str:
        """What it is grouped by: the judge's words for it, else its request, with the
        kinds of what the agent gave once asked (requests in other words that got the
        same back ask for the same)."""
        asked = asked_note(self.elicited)
        return f"{self.about or self.request} {asked}".strip()

    @property
    def event_id(self) -> uuid.UUID | None:
        """The event to show for it: the user's message, or the answer they rated."""
        return None if self.source.startswith("reward:") else uuid.UUID(self.source)


@dataclass(frozen=True)
class CorrectionGroup:
    """Corrections of one kind that mean the same thing; `key` names them."""

    kind: CorrectionKind
    key: str
    members: list[UserCorrection]


@dataclass(frozen=True)
class CorrectionRecords:
    """What a window's corrections are read from (see `read_corrections`), as
    `activities.evidence.correction_records` reads them."""

    trajectories: list[WindowTrajectory]
    rewards: list[Reward]
    tools: dict[uuid.UUID, set[str]]
    turns: list[UserTurn]
    conversation: list[ConversationTurn] = field(default_factory=list)

    def corrections(self, judge: CorrectionJudge | None = None) -> list[UserCorrection]:
        follow_ups = read_follow_ups(
            conversation_of(self.conversation),
            {t.id: t.task_type or "" for t in self.trajectories},
        )
        return read_corrections(
            self.trajectories, self.rewards, self.tools, self.turns, judge=judge,
            follow_ups=follow_ups, conversation=self.conversation,
        )  # fmt: skip


def read_corrections(
    trajectories: Iterable[WindowTrajectory],
    rewards: Iterable[Reward],
    tools: Mapping[uuid.UUID, set[str]],
    turns: Sequence[UserTurn],
    *,
    judge: CorrectionJudge | None = None,
    follow_ups: Sequence[FollowUp] = (),
    conversation: Sequence[ConversationTurn] = (),
) -> list[UserCorrection]:
    """The corrections in a window's records, oldest first (`CorrectionRecords.corrections`
    reads those of a window's correction records; the window analysis passes what it has
    read already).

    Args:
        tools: per trajectory, the tools its llm calls offered.
        turns: the window's follow-up user turns.
        judge: a judge model's reading, where the agent has one: it decides the kind
            (a category the user picked still comes first) and what to group by.
        follow_ups: the window's follow-ups as read (`evolution.followups`): a
            dissatisfied one marks the answer it follows as wrong.
        conversation: the window's user messages (`registry.conversation_turns`): a
            value a user stated before correcting is theirs.

    A reviewer's reading (`evolution.corrections.reviewed`) decides over both.
    """
    by_id = {t.id: t for t in trajectories}
    rewards = list(rewards)
    found = [
        *_feedback_corrections(rewards, by_id, tools),
        *_turn_corrections(turns, rewards, by_id, tools, follow_ups),
    ]
    unique = _unique(sorted(found, key=lambda c: (c.at, c.source)))
    unique = _with_own_values(unique, tools, conversation)
    read = _judged_corrections(unique, judge) if judge is not None else unique
    return apply_reviews(read, rewards)  # a reviewer's reading decides over both


def _judged_corrections(
    corrections: list[UserCorrection], judge: CorrectionJudge
) -> list[UserCorrection]:
    readings = judge([c.text for c in corrections])
    return [
        replace(c, kind=category_kind(c.category) or reading.kind, about=reading.about or None)
        if reading is not None
        else c
        for c, reading in zip(corrections, readings, strict=True)
    ]


def correction_groups(corrections: Sequence[UserCorrection]) -> list[CorrectionGroup]:
    """Corrections by kind, then by meaning; largest first, keys unique within a kind."""
    groups: list[CorrectionGroup] = []
    for kind in CorrectionKind:
        of_kind = [c for c in corrections if c.kind is kind]
        recent, older = of_kind[-MAX_GROUPED:], of_kind[:-MAX_GROUPED]
        grouped, alone = join_nearest(group_by_meaning(recent, _meaning), older, _meaning)
        grouped += group_by_meaning(alone[-MAX_GROUPED:], _meaning)  # what no recent one says
        seen: dict[str, int] = defaultdict(int)
        for members in grouped:
            key = label([_meaning(c) for c in members])
            seen[key] += 1
            key = key if seen[key] == 1 else f"{key} #{seen[key]}"
            groups.append(CorrectionGroup(kind, key, members))
    groups.sort(key=lambda g: -len({c.trajectory_id for c in g.members}))
    return groups


def _meaning(correction: UserCorrection) -> str:
    return correction.meaning


def conversation_of(turns: Iterable[ConversationTurn]) -> list[Turn]:
    """The registry's conversation turns as the follow-up reading takes them."""
    return [
        Turn(t.event_id, t.trajectory_id, t.seq, t.speaker, t.text or "", t.parent_id)
        for t in turns
    ]


def abstract(text: str, own: Iterable[str]) -> str:
    """`text` with each of its `own` values (as `specifics` gives them) written as its kind."""
    for value in sorted(own, key=len, reverse=True):
        read = values(value)
        kind = read[0].kind if read else "value"
        text = re.sub(rf"(?<!\w){re.escape(value)}(?!\w)", placeholder(kind), text, flags=re.I)
    return text


def own_values(
    corrections: Sequence[UserCorrection],
    said: Mapping[uuid.UUID, Sequence[tuple[datetime, frozenset[str]]]],
) -> dict[int, frozenset[str]]:
    """Per correction (by index), its values that are the user's own: stated by the user
    before it in the same trajectory (`said`: when, and which values), or in the
    corrections of too few sessions to be a fact that many users share."""
    sessions: dict[str, set[tuple[str, str]]] = defaultdict(set)
    valued: set[tuple[str, str]] = set()
    for correction in corrections:
        for value in specifics(correction.text):
            sessions[value].add((correction.tenant, correction.session))
            valued.add((correction.tenant, correction.session))
    # Too few sessions state values to tell a shared one from one user's: only what the
    # user said before is theirs.
    shared = max(_SHARED_MIN, math.ceil(_SHARED_SHARE * len(valued)))
    if len(valued) < _SHARED_MIN_SESSIONS:
        shared = 0
    found = {}
    for index, correction in enumerate(corrections):
        before = set().union(
            *(values for at, values in said.get(correction.trajectory_id, ()) if at < correction.at)
        )
        found[index] = frozenset(
            value
            for value in specifics(correction.text)
            if value in before or len(sessions[value]) < shared
        )
    return found


def _states_nothing(kind: CorrectionKind, text: str, own: frozenset[str]) -> bool:
    """A reading that a follow-up asking for what the answer left out overrides: nothing,
    or a "fact" without a value of its own (a question in a script without spaces)."""
    return kind is CorrectionKind.OTHER or (
        kind is CorrectionKind.MISSING_FACT and not specifics(text) - own
    )


def _with_own_values(
    corrections: list[UserCorrection],
    tools: Mapping[uuid.UUID, set[str]],
    conversation: Sequence[ConversationTurn],
) -> list[UserCorrection]:
    """The corrections classified again with their own values known."""
    said: dict[uuid.UUID, list[tuple[datetime, frozenset[str]]]] = defaultdict(list)
    for turn in conversation:
        if turn.speaker == "user" and turn.text:
            said[turn.trajectory_id].append((turn.created_at, specifics(turn.text)))
    own = own_values(corrections, said)
    found = []
    for index, correction in enumerate(corrections):
        mine = own[index]
        kind = classify(
            correction.text,
            tools=sorted(tools.get(correction.trajectory_id, ())),
            category=correction.category,
            own=mine,
        )
        if correction.asks and _states_nothing(kind, correction.text, mine):
            kind = CorrectionKind.INSTRUCTION
        found.append(replace(correction, kind=kind, own=mine))
    return found


# --- where corrections come from -----------------------------------------------------------


def _judged_wrong(reward: Reward) -> bool:
    """A reward that says the answer (or the task) went wrong."""
    if reward.source is RewardSource.IMPLICIT_NEXT_TURN:
        return reward.name == _IMPLICIT_CORRECTION and (reward.numeric or 0.0) < 0.5
    if reward.source is RewardSource.EXPLICIT:
        return reward.name == _EXPLICIT_CORRECTION or (
            reward.numeric is not None and reward.numeric < 0.5
        )
    return reward.name == _TASK_SUCCESS and (reward.numeric or 0.0) < 0.5


def _feedback_corrections(
    rewards: Iterable[Reward],
    trajectories: Mapping[uuid.UUID, WindowTrajectory],
    tools: Mapping[uuid.UUID, set[str]],
) -> list[UserCorrection]:
    """The words of feedback reports: one report becomes several rewards (thumb, category,
    correction) with one target and time, read together."""
    reports: dict[tuple, list[Reward]] = defaultdict(list)
    for reward in rewards:
        if reward.source is RewardSource.EXPLICIT and reward.trajectory_id in trajectories:
            reports[(reward.trajectory_id, reward.event_id, reward.created_at)].append(reward)
    found = []
    for report in reports.values():
        text, category = _report_words(report)
        if text:
            first = report[0]
            trajectory = trajectories[first.trajectory_id]
            source = str(first.event_id) if first.event_id else f"reward:{first.id}"
            found.append(
                _correction(
                    text, trajectory, tools, source, first.created_at,
                    answer=first.event_id, category=category,
                )
            )  # fmt: skip
    return found


def _report_words(report: Sequence[Reward]) -> tuple[str | None, str | None]:
    """(the report's words on what was wrong, its category)."""
    category = next((r.value.value for r in report if r.value.kind == "categorical"), None)
    correction = next(
        (r.critique for r in report if r.name == _EXPLICIT_CORRECTION and r.critique), None
    )
    if correction:
        return correction, category
    rated_down = any(_judged_wrong(r) for r in report)
    critique = next((r.critique for r in report if r.critique), None)
    return (critique if critique and (rated_down or category) else None), category


def _turn_corrections(
    turns: Sequence[UserTurn],
    rewards: Iterable[Reward],
    trajectories: Mapping[uuid.UUID, WindowTrajectory],
    tools: Mapping[uuid.UUID, set[str]],
    follow_ups: Sequence[FollowUp] = (),
) -> list[UserCorrection]:
    """The user's next message after each answer judged wrong (the first reply to it; later
    replies move on). A reply that says only that the answer was wrong ("No.", "Nope,
    that's not it", "Das stimmt nicht.") is read with the user's next message, where the
    correction follows: the two are one correction."""
    wrong_answers, wrong_trajectories = _judged(rewards, trajectories)
    dissatisfied = {f.event_id: f for f in follow_ups if f.dissatisfied}
    wrong_answers |= {f.answer_id for f in dissatisfied.values()}
    following = _following(turns)
    found: dict[uuid.UUID, UserCorrection] = {}
    joined: set[uuid.UUID] = set()
    for turn in turns:
        trajectory = trajectories.get(turn.trajectory_id)
        if trajectory is None or not turn.text or turn.parent_id in found:
            continue
        if turn.event_id in joined:
            continue
        if turn.parent_id in wrong_answers or turn.trajectory_id in wrong_trajectories:
            text = turn.text
            later = following.get(turn.event_id)
            if later is not None and later.text and _says_only_wrong(text):
                text = f"{text} {later.text}"
                joined.add(later.event_id)
            read = dissatisfied.get(turn.event_id)
            found[turn.parent_id] = _correction(
                text, trajectory, tools, str(turn.event_id), turn.created_at,
                answer=turn.parent_id, asks=read is not None and read.asks,
                elicited=read.elicited if read is not None else (),
            )  # fmt: skip
    return list(found.values())


def _following(turns: Sequence[UserTurn]) -> dict[uuid.UUID, UserTurn]:
    """Each turn's next turn in the same trajectory (turns come oldest first)."""
    last: dict[uuid.UUID, UserTurn] = {}
    after: dict[uuid.UUID, UserTurn] = {}
    for turn in turns:
        previous = last.get(turn.trajectory_id)
        if previous is not None:
            after[previous.event_id] = turn
        last[turn.trajectory_id] = turn
    return after


def _says_only_wrong(text: str) -> bool:
    """A reply with no content of its own: no value, and at most two words that mean
    anything, or a denial in any language with at most three ("Das stimmt so nicht")."""
    if specifics(text):
        return False
    count = len(terms(text))
    if Cue.DENIAL in cues(text) and count <= 3:
        return True
    return classify(text) is CorrectionKind.OTHER and count <= 2


def _judged(
    rewards: Iterable[Reward], trajectories: Mapping[uuid.UUID, WindowTrajectory]
) -> tuple[set[uuid.UUID], set[uuid.UUID]]:
    """(answers judged wrong, trajectories judged wrong as a whole)."""
    answers: set[uuid.UUID] = set()
    whole: set[uuid.UUID] = {
        t.id for t in trajectories.values() if t.outcome_status in _FAILED_STATUSES
    }
    for reward in rewards:
        if not _judged_wrong(reward):
            continue
        # A task outcome names its own event, not an answer: it judges the whole task.
        if reward.event_id is None or reward.name == _TASK_SUCCESS:
            whole.add(reward.trajectory_id)
        else:
            answers.add(reward.event_id)
    return answers, whole


def _correction(
    text: str,
    trajectory: WindowTrajectory,
    tools: Mapping[uuid.UUID, set[str]],
    source: str,
    at: datetime,
    *,
    answer: uuid.UUID | None,
    category: str | None = None,
    asks: bool = False,
    elicited: tuple[str, ...] = (),
) -> UserCorrection:
    offered = sorted(tools.get(trajectory.id, ()))
    return UserCorrection(
        text=text,
        kind=classify(text, tools=offered, category=category),
        tenant=trajectory.tenant,
        session=trajectory.session,
        trajectory_id=trajectory.id,
        source=source,
        at=at,
        answer=answer,
        category=category,
        asks=asks,
        elicited=elicited,
    )


def _unique(corrections: list[UserCorrection]) -> list[UserCorrection]:
    """One correction per trajectory and wording: a text typed in the conversation and
    repeated in the correction box is one correction."""
    seen: set[tuple[uuid.UUID, str]] = set()
    kept = []
    for correction in corrections:
        key = (correction.trajectory_id, " ".join(correction.text.lower().split()))
        if key not in seen:
            seen.add(key)
            kept.append(correction)
    return kept
