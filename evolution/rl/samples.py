"""Training prompts from captured traffic: what the gateway recorded, ready for RL.

Only what a training export may hold is read (`registry.training_records`: training-eligible
events of real user traffic, never shadow or evaluation traffic), for the tenants a job is
allowed to train on. Each recorded llm_call becomes a `RecordedPrompt`: the request the model
saw (after overlays), the tools it was offered, the completion it produced with the token ids
and behaviour logprobs the gateway captured, and its effective reward; where the version's
tool-schema overlay renamed arguments, also the agent's own tools and the renames, so that a
sampled call can be judged as the agent would receive it (`evolution.rl.rewards`).

A prompt's *reference* is the tool call known to be right for it: its own call when that step
was rewarded, else the rewarded call that resolved the same user turn later in the trajectory
(the agent's retry or the user's correction). Verifiable rewards compare samples with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from atdp import agent_request

__all__ = [
    "SUCCESS",
    "RecordedPrompt",
    "last_user",
    "record_prompts",
    "recorded_prompts",
    "rewarded_call",
    "split_holdout",
]

# A step with at least this effective reward counts as a success.
SUCCESS = 0.5


@dataclass(frozen=True)
class RecordedPrompt:
    """One captured llm_call as a training prompt."""

    event_id: str
    tenant: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = field(default_factory=list)
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    reward: float | None = None
    model_checkpoint: str | None = None
    reference: dict[str, Any] | None = None  # {"name": ..., "arguments": {...}}
    # The agent's own tools where a version's overlay showed the model others (else empty:
    # the same as `tools`), and per tool the model-facing argument name -> the agent's.
    agent_tools: list[dict[str, Any]] = field(default_factory=list)
    argument_maps: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def has_behaviour(self) -> bool:
        """Whether the recorded completion can join its group (ids and logprobs aligned)."""
        return bool(self.token_ids) and self.logprobs is not None


def recorded_prompts(records: Iterable[dict[str, Any]]) -> list[RecordedPrompt]:
    """The llm_calls of training records (`registry.training_records`) as prompts, in order."""
    return [prompt for record in records for prompt in record_prompts(record)]


def record_prompts(record: dict[str, Any]) -> list[RecordedPrompt]:
    """A training record's llm_calls as prompts, in the order of its `steps`."""
    tools = _offered_tools(record["events"])
    # What the gateway recorded to undo the overlays: the agent's own tools, the renames.
    undo = {
        event["id"]: agent_request((event.get("observation") or {}).get("data"))
        for event in record["events"]
    }
    steps = record["steps"]
    references = _references(steps)
    return [
        RecordedPrompt(
            event_id=step["event_id"],
            tenant=record["tenant"],
            messages=step["messages"],
            tools=tools.get(step["event_id"], []),
            token_ids=step["token_ids"],
            logprobs=step["logprobs"],
            reward=step["reward"] if step["reward"] is not None else record["reward"],
            model_checkpoint=step["model_checkpoint"],
            reference=references.get(step["event_id"]),
            agent_tools=list(undo.get(step["event_id"], {}).get("tools") or []),
            argument_maps=dict(undo.get(step["event_id"], {}).get("argument_maps") or {}),
        )
        for step in steps
    ]


def _offered_tools(events: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The OpenAI `tools` each llm_call was offered, from its recorded observation."""
    offered = {}
    for event in events:
        observation = event.get("observation") or {}
        offered[event["id"]] = [
            {"type": "function", "function": _function(tool)}
            for tool in observation.get("tools") or []
        ]
    return offered


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function = {"name": tool["name"], "parameters": tool.get("parameters") or {}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return function


def _references(steps: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each step's known-right call: its own when rewarded, else the next rewarded one
    answering the same last user message."""
    references: dict[str, dict[str, Any]] = {}
    for i, step in enumerate(steps):
        for later in steps[i:]:
            if last_user(later) != last_user(step):
                break
            call = rewarded_call(later)
            if call is not None:
                references[step["event_id"]] = call
                break
    return references


def last_user(step: dict[str, Any]) -> Any:
    """The text of the last user message a training step's prompt holds."""
    users = [m.get("content") for m in step["messages"] if m.get("role") == "user"]
    return users[-1] if users else None


def rewarded_call(step: dict[str, Any]) -> dict[str, Any] | None:
    """A training step's one tool call (arguments parsed) when it was rewarded a success."""
    import json

    calls = step["completion"]["tool_calls"]
    if step["reward"] is None or step["reward"] < SUCCESS or len(calls) != 1:
        return None
    try:
        arguments = json.loads(calls[0]["arguments"] or "{}")
    except ValueError:
        return None
    return {"name": calls[0]["name"], "arguments": arguments}


def split_holdout(
    prompts: Sequence[RecordedPrompt], fraction: float, *, seed: int = 0
) -> tuple[list[RecordedPrompt], list[RecordedPrompt]]:
    """(train, held out): a stable split by event id, so a resumed job holds out the same.

    With a fraction above 0 and two prompts or more, at least one is held out (the one of
    the lowest bucket): a small window would otherwise, now and then, have no held-out
    reward at all.
    """
    import hashlib

    def bucket(prompt: RecordedPrompt) -> float:
        digest = hashlib.sha256(f"{seed}:{prompt.event_id}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    cut = fraction
    if fraction > 0 and len(prompts) >= 2:
        cut = max(fraction, min(bucket(p) for p in prompts) + 1e-12)
    train = [p for p in prompts if bucket(p) >= cut]
    held = [p for p in prompts if bucket(p) < cut]
    return train, held
