"""On-policy distillation: the student's own samples, each token scored by a teacher.

The student samples completions of the recorded prompts; a teacher that shares its
tokenizer (local weights: a larger or better-trained checkpoint) gives the logprob of each
sampled token. A token's advantage is `log teacher - log student`: the per-token reverse KL,
so minimising the policy loss on it moves the student towards the teacher where the student
itself goes. The groups feed `evolution.rl.step.update_policy` (without dynamic sampling).
An OpenAI-compatible teacher gives logprobs of its own tokens, not of the student's, so it
serves `teacher.py` (SFT targets) instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evolution.rl.groups import sample_prompts
from evolution.rl.samples import RecordedPrompt

__all__ = ["distillation_groups"]


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
            [float(t) - s for t, s in zip(scored[i, : len(c.logprobs)], c.logprobs, strict=True)]
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
