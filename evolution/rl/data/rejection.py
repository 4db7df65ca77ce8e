"""Rejection sampling (RFT): the best of N samples of the current weights, kept when the
verifiable reward accepts it, as a demonstration to fine-tune on."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evolution.rl.groups import sample_prompts
from evolution.rl.rewards import RewardFunction
from evolution.rl.samples import RecordedPrompt
from evolution.rl.sft import Demonstration

__all__ = ["rejection_samples"]

_BATCH = 8  # prompts sampled together


def rejection_samples(
    policy: Any,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    *,
    n: int = 8,
    accept: float = 1.0,
    max_new_tokens: int = 96,
    temperature: float = 1.0,
    seed: int = 0,
) -> list[Demonstration]:
    """For each prompt, its best of `n` samples when that scores at least `accept`."""
    import torch

    generator = torch.Generator(device=policy.device).manual_seed(seed)
    kept: list[Demonstration] = []
    for start in range(0, len(prompts), _BATCH):
        batch = prompts[start : start + _BATCH]
        _, sampled = sample_prompts(
            policy,
            batch,
            n,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            guide_tool_names=True,
        )
        for prompt, samples in zip(batch, sampled, strict=True):
            score, text = max(((reward(prompt, s.text), s.text) for s in samples), key=_first)
            if score >= accept:
                kept.append(Demonstration(prompt.messages, text, prompt.tools or None))
    return kept


def _first(scored: tuple[float, str]) -> float:
    return scored[0]
