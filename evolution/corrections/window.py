"""Every correction users gave in a window of traffic, from the signals they really send.

Users say an answer was wrong in many ways: a thumb or a score, a category from a widget, a
correction box, or just their next message. A correction is the text that says *what* was
wrong, wherever it came from:

- the words of a feedback report (its correction, or its critique when the report rates
  the answer down or names a category);
- the user's next message after an answer judged wrong: by the gateway's next-turn signal,
  an explicit rating of that answer, or, when feedback or a failed outcome names only the
  trajectory, after any answer of that trajectory.

Each is classified (`classify`) and, in `correction_groups`, grouped by kind and meaning.
Texts are the stored ones: the gateway has already redacted them.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from atdp import Reward, RewardSource
from evolution.corrections.classify import CorrectionKind, category_kind, classify, specifics
from evolution.corrections.judge import CorrectionJudge
from evolution.corrections.meaning import group_by_meaning, join_nearest, label, terms
from evolution.window import WindowSpec, trajectory_window
from registry import (
    Session,
    UserTurn,
    WindowTrajectory,
    follow_up_turns,
    offered_tools,
    window_rewards,
    window_trajectories,
)

__all__ = [
    "CorrectionGroup",
    "CorrectionRecords",
    "UserCorrection",
    "correction_groups",
    "correction_records",
    "read_corrections",
    "window_corrections",
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

    @property
    def supplies_fact(self) -> bool:
        """It gives the agent a fact: a missing fact, or anything that asserts a value (a
        policy the user reported with its terms, "invoices within 30 days", say)."""
        return self.kind is CorrectionKind.MISSING_FACT or bool(specifics(self.text))

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
    """What a window's corrections are read from (see `read_corrections`)."""

    trajectories: list[WindowTrajectory]
    rewards: list[Reward]
    tools: dict[uuid.UUID, set[str]]
    turns: list[UserTurn]

    def corrections(self, judge: CorrectionJudge | None = None) -> list[UserCorrection]:
        return read_corrections(
            self.trajectories, self.rewards, self.tools, self.turns, judge=judge
        )


def correction_records(session: Session, spec: WindowSpec) -> CorrectionRecords:
    """The records of the window `spec` names that corrections are read from."""
    traffic = trajectory_window(spec)
    return CorrectionRecords(
        window_trajectories(session, traffic),
        window_rewards(session, traffic),
        offered_tools(session, traffic),
        follow_up_turns(session, traffic),
    )


def window_corrections(
    session: Session, spec: WindowSpec, *, judge: CorrectionJudge | None = None
) -> list[UserCorrection]:
    """Every correction users gave in the window `spec` names, oldest first."""
    return correction_records(session, spec).corrections(judge)


def read_corrections(
    trajectories: Iterable[WindowTrajectory],
    rewards: Iterable[Reward],
    tools: Mapping[uuid.UUID, set[str]],
    turns: Sequence[UserTurn],
    *,
    judge: CorrectionJudge | None = None,
) -> list[UserCorrection]:
    """The corrections in a window's records, oldest first (`window_corrections` reads
    them from the registry; the window analysis passes what it has read already).

    Args:
        tools: per trajectory, the tools its llm calls offered.
        turns: the window's follow-up user turns.
        judge: a judge model's reading, where the agent has one: it decides the kind
            (a category the user picked still comes first) and what to group by.
    """
    by_id = {t.id: t for t in trajectories}
    rewards = list(rewards)
    found = [
        *_feedback_corrections(rewards, by_id, tools),
        *_turn_corrections(turns, rewards, by_id, tools),
    ]
    unique = _unique(sorted(found, key=lambda c: (c.at, c.source)))
    return _judged_corrections(unique, judge) if judge is not None else unique


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
    """What a correction is grouped by: the judge's words for it, else its own."""
    return correction.about or correction.text


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
) -> list[UserCorrection]:
    """The user's next message after each answer judged wrong (the first reply to it; later
    replies move on). A reply that says only that the answer was wrong ("No.", "Nope,
    that's not it") is read with the user's next message, where the correction follows."""
    wrong_answers, wrong_trajectories = _judged(rewards, trajectories)
    following = _following(turns)
    found: dict[uuid.UUID, UserCorrection] = {}
    for turn in turns:
        trajectory = trajectories.get(turn.trajectory_id)
        if trajectory is None or not turn.text or turn.parent_id in found:
            continue
        if turn.parent_id in wrong_answers or turn.trajectory_id in wrong_trajectories:
            text = turn.text
            later = following.get(turn.event_id)
            if later is not None and later.text and _says_only_wrong(text):
                text = f"{text} {later.text}"
            found[turn.parent_id] = _correction(
                text, trajectory, tools, str(turn.event_id), turn.created_at,
                answer=turn.parent_id,
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
    """A reply with no content of its own: at most two words that mean anything."""
    return classify(text) is CorrectionKind.OTHER and len(terms(text)) <= 2


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
