"""A step's groups: completions of recorded prompts sampled from the current policy, scored.

Each drawn prompt gets `group_size` completions sampled from the current weights, with their
logprobs (the behaviour policy of a fresh sample is the proximal one, so its weight is 1); the
recorded completion joins its group when the gateway captured its ids and logprobs, corrected
by the decoupled importance weight because other weights produced it. Every completion is
scored with the verifiable reward, and its advantage is taken within its group.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from atdp.tool_text import offered_tool_names
from evolution.rl.config import TrainConfig
from evolution.rl.objectives import group_advantages, mixed_groups
from evolution.rl.policy import Completion, Policy
from evolution.rl.rewards import GroupReward, RewardFunction
from evolution.rl.samples import RecordedPrompt

__all__ = ["draw_groups", "mixed", "sample_prompts"]


def draw_groups(
    policy: Policy,
    usable: Sequence[RecordedPrompt],
    rng: random.Random,
    reward: RewardFunction,
    config: TrainConfig,
    generator: Any,
) -> list[dict[str, Any]]:
    """A step's groups: `prompts_per_step` drawn prompts, then, with dynamic sampling, up to
    `fill_draws` more while fewer than `prompts_per_step` groups have mixed rewards.

    Only mixed groups carry a gradient, so on traffic the model mostly gets right most draws
    are wasted; DAPO fills its batch the same way. The groups of one draw are sampled in one
    batch (`Policy.sample_many`), so a fill draws as many groups as are still missing.
    """

    def draw(count: int) -> list[dict[str, Any]]:
        chosen = [usable[rng.randrange(len(usable))] for _ in range(count)]
        return _groups(policy, chosen, reward, config, generator)

    groups = draw(config.prompts_per_step)
    extra = config.fill_draws if config.dynamic_sampling else 0
    while extra > 0 and (missing := config.prompts_per_step - len(mixed(groups))) > 0:
        count = min(extra, missing)
        groups += draw(count)
        extra -= count
    return groups


def mixed(groups: Sequence[dict[str, Any]]) -> set[int]:
    """The indices of the groups whose rewards differ."""
    rewards = [r for g in groups for r in g["rewards"]]
    return mixed_groups(rewards, [i for i, g in enumerate(groups) for _ in g["rewards"]])


def sample_prompts(
    policy: Policy,
    prompts: Sequence[RecordedPrompt],
    n: int,
    *,
    max_new_tokens: int,
    temperature: float,
    generator: Any,
    guide_tool_names: bool,
) -> tuple[list[list[int]], list[list[Completion]]]:
    """Each recorded prompt's token ids, and `n` completions of each, sampled in one batch
    (tool-call heads kept to the prompt's offered tools with `guide_tool_names`)."""
    ids = [policy.prompt_ids(prompt.messages, prompt.tools) for prompt in prompts]
    sampled = policy.sample_many(
        ids,
        n,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        generator=generator,
        tool_names=[
            offered_tool_names(prompt.tools) if guide_tool_names else () for prompt in prompts
        ],
    )
    return ids, sampled


def _groups(
    policy: Policy,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    config: TrainConfig,
    generator: Any,
) -> list[dict[str, Any]]:
    """The group of each prompt: fresh samples (all prompts' in one batch), plus the
    recorded completion when usable."""
    policy.model.eval()
    ids, sampled = sample_prompts(
        policy,
        prompts,
        config.group_size,
        max_new_tokens=config.max_new_tokens,
        temperature=config.temperature,
        generator=generator,
        guide_tool_names=config.guide_tool_names,
    )
    return [
        _group(policy, prompt, prompt_ids, samples, reward, config)
        for prompt, prompt_ids, samples in zip(prompts, ids, sampled, strict=True)
    ]


def _group(
    policy: Policy,
    prompt: RecordedPrompt,
    ids: list[int],
    samples: list[Completion],
    reward: RewardFunction,
    config: TrainConfig,
) -> dict[str, Any]:
    completions = [s.token_ids for s in samples]
    behaviour = [s.logprobs for s in samples]
    texts = [s.text for s in samples]
    if config.include_recorded and prompt.has_behaviour:
        completions.append(list(prompt.token_ids or []))
        behaviour.append(list(prompt.logprobs or []))
        texts.append(_text(policy, prompt.token_ids or []))
    rewards = _rewards(reward, prompt, texts, recorded=len(texts) > len(samples))
    advantages = group_advantages(
        rewards, [0] * len(rewards), normalise_std=config.objective.normalise_std
    )
    return {
        "prompt": ids,
        "completions": completions,
        "behaviour": behaviour,
        "rewards": rewards,
        "advantages": advantages,
    }


def _rewards(
    reward: RewardFunction, prompt: RecordedPrompt, texts: list[str], *, recorded: bool
) -> list[float]:
    """Each text's reward; a group reward (a relative judge's, `JudgedReward`) scores them
    together, told the recorded completion's explicit reward."""
    if not isinstance(reward, GroupReward):
        return [reward(prompt, text) for text in texts]
    rated: list[float | None] = [None] * (len(texts) - recorded)
    rated += [prompt.reward] if recorded else []
    return reward.score_group(prompt, texts, rated)


def _text(policy: Policy, token_ids: Sequence[int]) -> str:
    return policy.tokenizer.decode([t for t in token_ids if t not in policy.eos_ids])
