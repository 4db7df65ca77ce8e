"""Implicit next-state signals: what the next request says about the previous answer.

Each becomes a reward (source `implicit_next_turn`) on the llm_call it judges, with a
confidence below an explicit judgement's: a user who writes "no, ..." is probably
correcting, not certainly. Only the cheap check runs here, on the hot path: a next turn that
opens with a denial or says the answer was wrong or asks again, in any of the follow-up
lexicon's languages (`runtime.lexicon`). The rest of what a follow-up says (the
values it states, a re-ask, the agent's retraction) is read in the control plane's window
analysis.
"""

from __future__ import annotations

import uuid
from typing import Any

from atdp import BinaryValue, EventKind, Reward, RewardSource, new_id, utcnow
from runtime.lexicon import says_wrong

__all__ = ["abandonment_reward", "corrects", "implicit_rewards"]


def _reward(
    event: dict[str, Any], judged: uuid.UUID | str, name: str, critique: str, confidence: float
) -> Reward:
    return Reward(
        id=new_id(),
        tenant=event["metadata"]["tenant"],
        trajectory_id=event["trajectory_id"],
        event_id=judged,
        name=name,
        value=BinaryValue(value=False),
        critique=critique,
        source=RewardSource.IMPLICIT_NEXT_TURN,
        confidence=confidence,
        created_at=utcnow(),
    )


def implicit_rewards(
    events: list[dict[str, Any]], *, regenerated: uuid.UUID | None = None
) -> list[Reward]:
    """Rewards implied by one exchange's new events.

    Args:
        events: the exchange's event documents (`atdp.Event` in its JSON shape), in order:
            tool results, user messages, the llm_call.
        regenerated: the previous llm_call, when this request repeats its prompt unchanged.
    """
    rewards: list[Reward] = []
    for event in events:
        parent = event.get("parent_id")
        if parent is None:
            continue
        error = (event.get("outcome") or {}).get("error_class")
        if event["kind"] == EventKind.TOOL_CALL and error:
            rewards.append(
                _reward(event, parent, "tool_success", f"the tool call failed: {error}", 0.6)
            )
        if event["kind"] == EventKind.USER_MESSAGE and _corrects(event):
            rewards.append(
                _reward(
                    event, parent, "user_accepted", "the next user turn corrects the answer", 0.5
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


def _corrects(event: dict[str, Any]) -> bool:
    messages = (event.get("observation") or {}).get("messages") or []
    text = next((m["content"] for m in messages if isinstance(m.get("content"), str)), "")
    return corrects(text)


def corrects(text: str) -> bool:
    """Whether a user's next message says the previous answer was wrong, or asks again."""
    return says_wrong(text)


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
