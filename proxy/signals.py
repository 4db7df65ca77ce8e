"""Implicit next-state signals: what the next request says about the previous answer.

Each becomes a reward (source `implicit_next_turn`) on the llm_call it judges, with a
confidence below an explicit judgement's: a user who writes "no, ..." is probably
correcting, not certainly.
"""

from __future__ import annotations

import re
import uuid

from atdp import BinaryValue, Event, EventKind, Reward, RewardSource, new_id, utcnow

__all__ = ["CORRECTION", "abandonment_reward", "implicit_rewards"]

CORRECTION = re.compile(
    r"^\s*(no\b|nope\b|wrong\b|that'?s (not|wrong|incorrect)|not what i (asked|meant|wanted)"
    r"|incorrect\b|actually,|you (misunderstood|got it wrong)|i said\b|try again\b)",
    re.IGNORECASE,
)


def _reward(event: Event, judged: uuid.UUID, name: str, critique: str, confidence: float) -> Reward:
    return Reward(
        id=new_id(),
        tenant=event.metadata.tenant,
        trajectory_id=event.trajectory_id,
        event_id=judged,
        name=name,
        value=BinaryValue(value=False),
        critique=critique,
        source=RewardSource.IMPLICIT_NEXT_TURN,
        confidence=confidence,
        created_at=utcnow(),
    )


def implicit_rewards(events: list[Event], *, regenerated: uuid.UUID | None = None) -> list[Reward]:
    """Rewards implied by one exchange's new events.

    Args:
        events: the exchange's events, in order (tool results, user messages, the llm_call).
        regenerated: the previous llm_call, when this request repeats its prompt unchanged.
    """
    rewards: list[Reward] = []
    for event in events:
        if event.parent_id is None:
            continue
        if event.kind is EventKind.TOOL_CALL and event.outcome and event.outcome.error_class:
            rewards.append(
                _reward(
                    event,
                    event.parent_id,
                    "tool_success",
                    f"the tool call failed: {event.outcome.error_class}",
                    0.6,
                )
            )
        if event.kind is EventKind.USER_MESSAGE and event.observation:
            text = next(
                (m.content for m in event.observation.messages if isinstance(m.content, str)), ""
            )
            if CORRECTION.match(text or ""):
                rewards.append(
                    _reward(
                        event,
                        event.parent_id,
                        "user_accepted",
                        "the next user turn corrects the answer",
                        0.5,
                    )
                )
    if regenerated is not None and events:
        rewards.append(
            _reward(
                events[-1],
                regenerated,
                "user_accepted",
                "the same prompt was sent again (regenerate)",
                0.4,
            )
        )
    return rewards


def abandonment_reward(
    tenant: str, trajectory_id: uuid.UUID, last_llm_call: uuid.UUID | None
) -> Reward:
    """A session that went quiet without the agent reporting an outcome.

    Weak evidence (a user may simply have been satisfied), so a low confidence: it matters
    only in aggregate, as a rise in abandonment across a window.
    """
    return Reward(
        id=new_id(),
        tenant=tenant,
        trajectory_id=trajectory_id,
        event_id=last_llm_call,
        name="session_completed",
        value=BinaryValue(value=False),
        critique="the session went idle without a reported task outcome",
        source=RewardSource.IMPLICIT_NEXT_TURN,
        confidence=0.2,
        created_at=utcnow(),
    )
