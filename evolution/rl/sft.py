"""Supervised fine-tuning: teach a policy the shape of its answers before RL sharpens them.

GRPO learns only where a group's samples differ in reward, so a policy that never produces a
well-formed tool call cannot start. A short SFT on demonstrations (the demo's warm start, the
tests' partly competent policy) gives it the structure; RL then improves the decisions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from evolution.rl.policy import Policy

__all__ = ["Demonstration", "supervised_finetune"]


@dataclass(frozen=True)
class Demonstration:
    """A chat request and the completion text the policy should write for it."""

    messages: list[dict]
    completion: str
    tools: list[dict] | None = None


def supervised_finetune(
    policy: Policy,
    demonstrations: Sequence[Demonstration],
    *,
    steps: int,
    batch_size: int = 8,
    learning_rate: float = 3e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
) -> float:
    """Next-token loss on the completions (prompts masked); returns the last batch's loss."""
    import torch

    rng = random.Random(seed)
    torch.manual_seed(seed)
    optimiser = torch.optim.AdamW(policy.model.parameters(), lr=learning_rate)
    encoded = [
        (
            policy.prompt_ids(d.messages, d.tools),
            policy.tokenizer.encode(d.completion, add_special_tokens=False) + [policy.eos_id],
        )
        for d in demonstrations
    ]
    policy.model.train()
    loss = torch.zeros(())
    for step in range(1, steps + 1):
        optimiser.zero_grad()
        batch = [encoded[rng.randrange(len(encoded))] for _ in range(batch_size)]
        loss = torch.zeros(())
        for prompt, completion in batch:
            logprobs, mask = policy.token_logprobs(prompt, [completion], grad=True)
            loss = loss - logprobs.sum() / mask.sum() / batch_size
        loss.backward()
        optimiser.step()
        if on_step is not None:
            on_step(step, float(loss.detach()))
    policy.model.eval()
    return float(loss.detach())
