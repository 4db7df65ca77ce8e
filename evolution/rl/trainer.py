"""The torch RL trainer: group samples from the current policy, GRPO/PPO updates, checkpoints.

One step:
  1. take `prompts_per_step` recorded prompts (cycling through the training set);
  2. sample `group_size` completions of each from the current weights, with their logprobs
     (the behaviour policy of a fresh sample is the proximal one, so its weight is 1); the
     recorded completion joins its group when the gateway captured its ids and logprobs,
     corrected by the decoupled importance weight because other weights produced it;
  3. score every completion with the verifiable reward; drop groups whose rewards are all
     equal (DAPO's dynamic sampling: they carry no signal);
  4. one policy-gradient update per group (token-mean loss, gradients accumulated).

Checkpoints are written every `checkpoint_every` steps as `step-<N>/` (weights, tokenizer and
trainer state: optimiser, RNG, step) via a temporary directory and an atomic rename, so a job
killed at any moment resumes from its last complete checkpoint, not from zero.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from atdp.tool_text import offered_tool_names
from evolution.rl.objectives import ObjectiveConfig, group_advantages, mixed_groups, policy_loss
from evolution.rl.policy import Completion, Policy
from evolution.rl.rewards import RewardFunction
from evolution.rl.samples import RecordedPrompt

__all__ = [
    "LoraSettings",
    "StepMetrics",
    "TrainConfig",
    "TrainResult",
    "draw_groups",
    "evaluate",
    "latest_checkpoint",
    "train",
    "update_policy",
]

STATE_FILE = "trainer_state.pt"


@dataclass(frozen=True)
class LoraSettings:
    rank: int = 8
    alpha: int = 16
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class TrainConfig:
    """A training job's knobs; the defaults suit the tiny model on a 2-core CPU."""

    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    steps: int = 100
    prompts_per_step: int = 8
    group_size: int = 8
    learning_rate: float = 3e-4
    max_new_tokens: int = 96
    temperature: float = 1.0
    dynamic_sampling: bool = True
    fill_draws: int = 0  # extra groups a step may draw to fill its batch with mixed ones
    include_recorded: bool = True
    # Keep sampled tool calls' heads to the offered tools, as the local engine serves them.
    guide_tool_names: bool = True
    reference_kl: bool = False  # keep a frozen copy of the start weights for the KL penalty
    lora: LoraSettings | None = None
    checkpoint_every: int = 25
    seed: int = 0
    backend: Literal["torch", "megatron"] = "torch"
    device: str = "cpu"
    threads: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(asdict(self)))


@dataclass(frozen=True)
class StepMetrics:
    """What one step did; heartbeated, logged to MLflow, shown in progress bars."""

    step: int
    loss: float
    reward: float  # mean reward of this step's samples
    kl: float
    clip_fraction: float
    importance_weight: float
    groups_used: int
    seconds: float


@dataclass(frozen=True)
class TrainResult:
    checkpoint: Path  # the final weights, a full HF checkpoint (LoRA merged)
    steps: int
    resumed_from: int  # the step the job resumed from, 0 for a fresh start
    history: list[StepMetrics]


def train(
    base: str | Path,
    out_dir: str | Path,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    config: TrainConfig,
    *,
    on_step: Callable[[StepMetrics], None] | None = None,
    on_checkpoint: Callable[[int, Path], None] | None = None,
) -> TrainResult:
    """Train the policy in `base` on `prompts`; resumes from the newest checkpoint in `out_dir`.

    Args:
        base: the parent version's checkpoint directory.
        out_dir: where `step-<N>/` checkpoints and the final `final/` directory go.
        prompts: the training prompts; those without a reference are skipped.
        reward: the verifiable reward of a sampled completion.
        on_step / on_checkpoint: progress callbacks (heartbeats, MLflow, a progress bar).
    """
    if config.backend == "megatron":
        from evolution.rl.megatron import train_megatron  # GPU workers only

        return train_megatron(
            base, out_dir, prompts, reward, config, on_step=on_step, on_checkpoint=on_checkpoint
        )
    import torch

    usable = [p for p in prompts if p.reference is not None]
    if not usable:
        raise ValueError(
            "no training prompt has a reference action: the window holds no rewarded tool "
            "call to learn from"
        )
    use_threads(config.threads)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    resume = latest_checkpoint(out_dir)
    policy = _load_policy(Path(base), resume, config)
    reference = _reference(Path(base), config)
    optimiser = torch.optim.AdamW(
        [p for p in policy.model.parameters() if p.requires_grad], lr=config.learning_rate
    )
    start = 0
    rng = random.Random(config.seed)
    generator = torch.Generator(device=policy.device).manual_seed(config.seed)
    if resume is not None:
        start = _restore(resume, optimiser, rng, generator)
    history: list[StepMetrics] = []
    for step in range(start + 1, config.steps + 1):
        began = time.perf_counter()
        groups = draw_groups(policy, usable, rng, reward, config, generator)
        metrics = update_policy(policy, reference, optimiser, groups, config)
        metrics = StepMetrics(step=step, seconds=time.perf_counter() - began, **metrics)
        history.append(metrics)
        if on_step is not None:
            on_step(metrics)
        if step % config.checkpoint_every == 0 or step == config.steps:
            path = _save(policy, out_dir, step, optimiser, rng, generator, config)
            if on_checkpoint is not None:
                on_checkpoint(step, path)
    final = _final(policy, out_dir, config)
    return TrainResult(checkpoint=final, steps=config.steps, resumed_from=start, history=history)


def use_threads(threads: int | None) -> None:
    """torch's CPU threads for a training job: `threads`, or every CPU this process may use.

    The setting is process-wide, and a worker's local engines may have set it to 1 (best for
    serving a small model to many callers, `EVOPLANE_LOCAL_THREADS`); a training job should
    not inherit that by accident.
    """
    import torch

    torch.set_num_threads(threads or len(os.sched_getaffinity(0)))


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
    while extra > 0 and (missing := config.prompts_per_step - len(_mixed(groups))) > 0:
        count = min(extra, missing)
        groups += draw(count)
        extra -= count
    return groups


def _mixed(groups: Sequence[dict[str, Any]]) -> set[int]:
    """The indices of the groups whose rewards differ."""
    rewards = [r for g in groups for r in g["rewards"]]
    return mixed_groups(rewards, [i for i, g in enumerate(groups) for _ in g["rewards"]])


def update_policy(
    learner: Policy, reference: Any, optimiser: Any, groups: list[dict], config: TrainConfig
) -> dict[str, Any]:
    """One optimiser step on the groups with mixed rewards; returns the step's metrics.

    `learner` is the model the loss is computed on (for the megatron backend, not the one
    that sampled).
    """
    import torch

    rewards = [r for g in groups for r in g["rewards"]]
    kept = _mixed(groups) if config.dynamic_sampling else set(range(len(groups)))
    learner.model.train()
    optimiser.zero_grad()
    totals = {"loss": 0.0, "kl": 0.0, "clip_fraction": 0.0, "importance_weight": 0.0}
    for index in sorted(kept):
        terms = _group_loss(learner, reference, groups[index], config)
        (terms.loss / len(kept)).backward()
        totals["loss"] += float(terms.loss.detach()) / len(kept)
        totals["kl"] += terms.kl / len(kept)
        totals["clip_fraction"] += terms.clip_fraction / len(kept)
        totals["importance_weight"] += terms.importance_weight / len(kept)
    if kept:
        torch.nn.utils.clip_grad_norm_(learner.model.parameters(), 1.0)
        optimiser.step()
    learner.model.eval()
    return {
        **totals,
        "importance_weight": totals["importance_weight"] if kept else 1.0,
        "reward": sum(rewards) / len(rewards),
        "groups_used": len(kept),
    }


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
    ids, sampled = _sample_prompts(
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


def _sample_prompts(
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
    rewards = [reward(prompt, text) for text in texts]
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


def _text(policy: Policy, token_ids: Sequence[int]) -> str:
    return policy.tokenizer.decode([t for t in token_ids if t != policy.eos_id])


def _group_loss(policy: Policy, reference: Any, group: dict[str, Any], config: TrainConfig) -> Any:
    import torch

    logprobs, mask = policy.token_logprobs(
        group["prompt"], group["completions"], temperature=config.temperature, grad=True
    )
    width = logprobs.shape[1]
    behaviour = torch.tensor(
        [lp + [0.0] * (width - len(lp)) for lp in group["behaviour"]], device=logprobs.device
    )
    ref = None
    if reference is not None:
        ref, _ = reference.token_logprobs(
            group["prompt"], group["completions"], temperature=config.temperature
        )
    advantages = torch.tensor(group["advantages"], device=logprobs.device)
    # One update per batch: the proximal policy is the current weights before the step.
    return policy_loss(
        logprobs, logprobs.detach(), behaviour, advantages, mask, config.objective, ref
    )


# --- evaluation ---------------------------------------------------------------------------


def evaluate(
    policy: Policy,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    *,
    samples: int = 4,
    max_new_tokens: int = 96,
    temperature: float = 1.0,
    seed: int = 0,
    guide_tool_names: bool = True,
) -> float:
    """Mean reward of `samples` completions per prompt: the held-out replay reward.

    `guide_tool_names` samples as the local engine serves (see `TrainConfig`).
    """
    import torch

    usable = [p for p in prompts if p.reference is not None]
    if not usable:
        raise ValueError("no held-out prompt has a reference action to score against")
    generator = torch.Generator(device=policy.device).manual_seed(seed)
    scores: list[float] = []
    for start in range(0, len(usable), _EVALUATION_BATCH):
        batch = usable[start : start + _EVALUATION_BATCH]
        _, sampled = _sample_prompts(
            policy,
            batch,
            samples,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            generator=generator,
            guide_tool_names=guide_tool_names,
        )
        scores += [
            sum(reward(prompt, c.text) for c in completions) / samples
            for prompt, completions in zip(batch, sampled, strict=True)
        ]
    return sum(scores) / len(scores)


_EVALUATION_BATCH = 16  # prompts sampled together (memory grows with the batch)


# --- weights and checkpoints --------------------------------------------------------------


def _load_policy(base: Path, resume: Path | None, config: TrainConfig) -> Policy:
    """The weights to train: a full checkpoint's own, or the base plus its LoRA adapter."""
    import torch

    torch.manual_seed(config.seed)
    full_resume = resume is not None and config.lora is None
    policy = Policy.load(resume if full_resume else base, device=config.device)
    if config.lora is not None:
        from peft import LoraConfig, PeftModel, get_peft_model

        if resume is not None:
            policy.model = PeftModel.from_pretrained(
                policy.model, resume / "adapter", is_trainable=True
            )
        else:
            policy.model = get_peft_model(
                policy.model,
                LoraConfig(
                    r=config.lora.rank,
                    lora_alpha=config.lora.alpha,
                    target_modules=list(config.lora.target_modules),
                    task_type="CAUSAL_LM",
                ),
            )
    policy.model.eval()
    return policy


def _reference(base: Path, config: TrainConfig) -> Policy | None:
    """The frozen start weights (also after a resume), when the objective has a KL penalty."""
    wants_kl = config.reference_kl or config.objective.kind == "ppo" or config.objective.kl_coef
    if not wants_kl:
        return None
    frozen = Policy.load(base, device=config.device)
    for parameter in frozen.model.parameters():
        parameter.requires_grad_(False)
    return frozen


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete `step-<N>` checkpoint in `out_dir`, None when there is none."""
    complete = [
        path
        for path in Path(out_dir).glob("step-*")
        if path.is_dir() and (path / STATE_FILE).exists() and path.name[5:].isdigit()
    ]
    return max(complete, key=lambda p: int(p.name[5:]), default=None)


def _save(
    policy: Policy,
    out_dir: Path,
    step: int,
    optimiser: Any,
    rng: random.Random,
    generator: Any,
    config: TrainConfig,
) -> Path:
    import torch

    target = out_dir / f"step-{step}"
    staging = out_dir / f".step-{step}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    _write_weights(policy, staging, config, merged=False)
    state = {
        "step": step,
        "optimiser": optimiser.state_dict(),
        "rng": rng.getstate(),
        "generator": generator.get_state(),
        "config": config.to_dict(),
    }
    torch.save(state, staging / STATE_FILE)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    return target


def _write_weights(policy: Policy, directory: Path, config: TrainConfig, *, merged: bool) -> None:
    """Full weights, or (LoRA, not merged) the adapter alone: the base never changes."""
    directory.mkdir(parents=True, exist_ok=True)
    policy.tokenizer.save_pretrained(directory)
    if config.lora is None:
        policy.model.save_pretrained(directory)
    elif merged:
        import copy

        copy.deepcopy(policy.model).merge_and_unload().save_pretrained(directory)
    else:
        policy.model.save_pretrained(directory / "adapter")


def _restore(path: Path, optimiser: Any, rng: random.Random, generator: Any) -> int:
    import torch

    state = torch.load(path / STATE_FILE, weights_only=False)
    optimiser.load_state_dict(state["optimiser"])
    rng.setstate(state["rng"])
    generator.set_state(state["generator"])
    return int(state["step"])


def _final(policy: Policy, out_dir: Path, config: TrainConfig) -> Path:
    final = out_dir / "final"
    staging = out_dir / ".final.partial"
    shutil.rmtree(staging, ignore_errors=True)
    _write_weights(policy, staging, config, merged=True)
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return final
