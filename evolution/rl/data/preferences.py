"""DPO pairs: what should have been said over what was said.

From traffic: a step the user or a reward judged wrong (its own effective reward below
success: an explicit rating, or the gateway's next-turn correction signal) is the *rejected*
answer; the *chosen* one is the rewarded call that resolved it, the agent's retry of the same
user turn, or its answer after the user's next turn (the correction). Only a different call
makes a pair (the same call rewarded later says the answer was fine after all).

From sampling: within a group of completions of one prompt, the best over the worst, where
their rewards differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from evolution.rl.data.text import call_text, completion_text
from evolution.rl.samples import (
    SUCCESS,
    RecordedPrompt,
    last_user,
    record_prompts,
    rewarded_call,
)

__all__ = ["PreferencePair", "correction_pairs"]


@dataclass(frozen=True)
class PreferencePair:
    """A prompt, the completion to prefer and the one to move away from, and where the
    pair came from ("retry", "correction", "group")."""

    prompt: RecordedPrompt
    chosen: str
    rejected: str
    source: str


def correction_pairs(records: Iterable[dict[str, Any]]) -> list[PreferencePair]:
    """The pairs of each training record (`training_records`): (the rewarded call that
    resolved a wrong step) over (the wrong step's answer)."""
    pairs: list[PreferencePair] = []
    for record in records:
        steps = record["steps"]
        prompts = record_prompts(record)
        for index, step in enumerate(steps):
            if not _judged_wrong(step):
                continue
            found = _resolution(steps, index)
            if found is None:
                continue
            call, source = found
            pairs.append(
                PreferencePair(
                    prompt=prompts[index],
                    chosen=call_text(call["name"], call["arguments"]),
                    rejected=completion_text(step["completion"]),
                    source=source,
                )
            )
    return pairs


def _judged_wrong(step: dict[str, Any]) -> bool:
    return step["reward"] is not None and step["reward"] < SUCCESS


def _resolution(steps: list[dict[str, Any]], index: int) -> tuple[dict[str, Any], str] | None:
    """The first rewarded call after step `index` within its user turn ("retry") or the
    next one ("correction"), when it differs from what the step called."""
    turn = last_user(steps[index])
    turns_seen = 0
    for later in steps[index + 1 :]:
        if last_user(later) != turn:
            turn, turns_seen = last_user(later), turns_seen + 1
            if turns_seen > 1:
                return None
        call = rewarded_call(later)
        if call is None:
            continue
        if _same_call(call, steps[index]["completion"]):
            return None
        return call, "retry" if turns_seen == 0 else "correction"
    return None


def _same_call(call: dict[str, Any], completion: dict[str, Any]) -> bool:
    made = completion.get("tool_calls") or []
    if len(made) != 1 or made[0]["name"] != call["name"]:
        return False
    try:
        return json.loads(made[0]["arguments"] or "{}") == call["arguments"]
    except ValueError:
        return False
