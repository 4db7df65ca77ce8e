"""On-policy distillation: the student's own samples, each token scored by a teacher.

The student samples completions of the recorded prompts; a teacher that shares its
tokenizer (local weights: a larger or better-trained checkpoint) gives the logprob of each
sampled token. A token's advantage is `log teacher - log student`: the per-token reverse KL,
so minimising the policy loss on it moves the student towards the teacher where the student
itself goes. The groups feed `evolution.rl.step.update_policy` (without dynamic sampling).
An OpenAI-compatible teacher gives logprobs of its own tokens, not of the student's, so it
serves `teacher.py` (SFT targets) instead. `distillation_draw` is the training loop's step
(`evolution.rl.trainer.train` with the objective "distill").
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from evolution.rl.config import TrainConfig
from evolution.rl.groups import sample_prompts
from evolution.rl.objectives import distillation_advantages
from evolution.rl.samples import RecordedPrompt

__all__ = ["distillation_draw", "distillation_groups"]


def distillation_groups(
    student: Any,
    teacher: Any,
    prompts: Sequence[RecordedPrompt],
    *,
    samples: int = 4,
    max_new_tokens: int = 96,
    temperature: float = 1.0,
    generator: Any = None,
) -> list[dict[str, Any]]:
    """A group of `samples` student completions per prompt, with per-token advantages."""
    ids, sampled = sample_prompts(
        student,
        prompts,
        samples,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        generator=generator,
        guide_tool_names=True,
    )
    groups = []
    for prompt_ids, completions in zip(ids, sampled, strict=True):
        tokens = [c.token_ids for c in completions]
        scored, _ = teacher.token_logprobs(prompt_ids, tokens, temperature=temperature)
        advantages = [
            distillation_advantages(scored[i, : len(c.logprobs)].tolist(), c.logprobs)
            for i, c in enumerate(completions)
        ]
        groups.append(
            {
                "prompt": prompt_ids,
                "completions": tokens,
                "behaviour": [c.logprobs for c in completions],
                "rewards": [sum(a) / len(a) for a in advantages],
                "advantages": advantages,
            }
        )
    return groups


def distillation_draw(teacher: Any, config: TrainConfig) -> Callable[..., list[dict[str, Any]]]:
    """A training step's groups for on-policy distillation: `prompts_per_step` drawn prompts,
    `group_size` student samples of each, scored by `teacher` (a `Policy`)."""

    def draw(
        student: Any, prompts: Sequence[RecordedPrompt], rng: random.Random, generator: Any
    ) -> list[dict[str, Any]]:
        if student.tokenizer.get_vocab() != teacher.tokenizer.get_vocab():
            raise ValueError(
                "the distillation teacher does not share the student's tokenizer, so it "
                "cannot score the student's tokens; distil from a checkpoint of the same family"
            )
        chosen = [prompts[rng.randrange(len(prompts))] for _ in range(config.prompts_per_step)]
        return distillation_groups(
            student,
            teacher,
            chosen,
            samples=config.group_size,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            generator=generator,
        )

    return draw
