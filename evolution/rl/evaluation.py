"""The held-out replay reward: how well a policy does on recorded prompts it never trained on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evolution.rl.groups import sample_prompts
from evolution.rl.policy import Policy
from evolution.rl.rewards import RewardFunction
from evolution.rl.samples import RecordedPrompt

__all__ = ["evaluate", "prompt_rewards"]

_EVALUATION_BATCH = 16  # prompts sampled together (memory grows with the batch)


def evaluate(
    policy: Policy,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    *,
    samples: int = 4,
    **sampling: Any,
) -> float:
    """Mean reward of `samples` completions per prompt: the held-out replay reward.

    `sampling`: `prompt_rewards`'s (`max_new_tokens`, `temperature`, `seed`,
    `guide_tool_names`, which samples as the local engine serves; see `TrainConfig`).
    """
    scores = prompt_rewards(policy, prompts, reward, samples=samples, **sampling)
    return sum(sum(s) for s in scores) / (samples * len(scores))


def prompt_rewards(
    policy: Policy,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    *,
    samples: int = 4,
    max_new_tokens: int = 96,
    temperature: float = 1.0,
    seed: int = 0,
    guide_tool_names: bool = True,
) -> list[list[float]]:
    """The reward of each of `samples` completions of each prompt with a reference."""
    import torch

    usable = [p for p in prompts if p.reference is not None]
    if not usable:
        raise ValueError("no held-out prompt has a reference action to score against")
    generator = torch.Generator(device=policy.device).manual_seed(seed)
    scores: list[list[float]] = []
    for start in range(0, len(usable), _EVALUATION_BATCH):
        batch = usable[start : start + _EVALUATION_BATCH]
        _, sampled = sample_prompts(
            policy,
            batch,
            samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            guide_tool_names=guide_tool_names,
        )
        scores += [
            [reward(prompt, c.text) for c in completions]
            for prompt, completions in zip(batch, sampled, strict=True)
        ]
    return scores
