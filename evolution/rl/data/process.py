"""Process rewards: each turn scored from its next state, in the spirit of next-state-signal RL.

What follows an llm_call says how it went: the tool results its calls returned (success or
an error) and the user's next turn (which the gateway, or the user's own rating, turns into
the step's effective reward). Each signal is read into [-1, 1] and a turn's reward is their
mean. Where the next state says what should have been done (a tool's error message, the
words of the user's correcting turn) the turn also gets a hint.

`process_advantages` centres the rewards into per-turn advantages for GRPO/PPO's loss
(`evolution.rl.objectives.policy_loss`), one per recorded completion
(`evolution.rl.groups.recorded_groups`). `trajectory_advantages` is the multi-turn case
where only the whole trajectory is rewarded: every turn of it shares the trajectory's
reward, centred within its task type (the group of trajectories doing the same task).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from evolution.rl.samples import SUCCESS

__all__ = ["TurnReward", "process_advantages", "trajectory_advantages", "turn_rewards"]


@dataclass(frozen=True)
class TurnReward:
    """One llm_call's reward read off its next state, and a hint where it says one."""

    event_id: str
    value: float  # in [-1, 1]
    hint: str | None
    signals: int  # how many next-state signals the value averages


def turn_rewards(records: Iterable[dict[str, Any]]) -> list[TurnReward]:
    """The turn rewards of every llm_call with a next state, of each training record."""
    turns = []
    for record in records:
        children: dict[str, list[dict[str, Any]]] = {}
        for event in record["events"]:
            if event.get("parent_id"):
                children.setdefault(str(event["parent_id"]), []).append(event)
        for step in record["steps"]:
            turn = _turn(step, children.get(step["event_id"], []))
            if turn is not None:
                turns.append(turn)
    return turns


def process_advantages(turns: Sequence[TurnReward]) -> dict[str, float]:
    """Each turn's reward minus the mean over `turns`: its advantage, by event id."""
    if not turns:
        return {}
    mean = sum(t.value for t in turns) / len(turns)
    return {t.event_id: t.value - mean for t in turns}


def trajectory_advantages(records: Iterable[dict[str, Any]]) -> dict[str, float]:
    """Each llm_call's advantage as its trajectory's: the trajectory's effective reward
    minus the mean of its task type's rewarded trajectories (unrewarded ones left out)."""
    from evolution.rl.objectives import group_advantages

    rewarded = [r for r in records if r["reward"] is not None]
    advantages = group_advantages(
        [r["reward"] for r in rewarded], [r["task_type"] for r in rewarded], normalise_std=False
    )
    return {
        step["event_id"]: advantage
        for record, advantage in zip(rewarded, advantages, strict=True)
        for step in record["steps"]
    }


def _turn(step: dict[str, Any], after: list[dict[str, Any]]) -> TurnReward | None:
    signals: list[float] = []
    hints: list[str] = []
    for event in after:
        if event["kind"] == "tool_call":
            ok, hint = _tool_signal(event)
            signals.append(1.0 if ok else -1.0)
            if hint:
                hints.append(hint)
    if step["reward"] is not None:  # the rating, or the next-turn judgement of the answer
        signals.append(2.0 * step["reward"] - 1.0)
        if step["reward"] < SUCCESS:
            hints += [text for e in after if (text := _user_text(e))]
    if not signals:
        return None
    return TurnReward(
        event_id=step["event_id"],
        value=sum(signals) / len(signals),
        hint="; ".join(hints) or None,
        signals=len(signals),
    )


def _tool_signal(event: dict[str, Any]) -> tuple[bool, str | None]:
    outcome = event.get("outcome") or {}
    failed = bool(outcome.get("error_class")) or outcome.get("success") is False
    if not failed:
        return True, None
    call = (event.get("action") or {}).get("call") or {}
    why = outcome.get("error_message") or outcome.get("error_class") or "an error"
    return False, f"{call.get('name', 'a tool')} failed: {why}"


def _user_text(event: dict[str, Any]) -> str | None:
    if event["kind"] != "user_message":
        return None
    for message in (event.get("observation") or {}).get("messages") or []:
        if isinstance(message.get("content"), str) and message["content"].strip():
            return message["content"].strip()
    return None
