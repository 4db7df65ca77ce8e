"""The training loop every backend runs; a backend only supplies the models (`TrainingModels`).

One step:
  1. draw `prompts_per_step` recorded prompts and sample a group of completions of each from
     the current weights (`groups.draw_groups`); groups whose rewards are all equal carry no
     signal (DAPO's dynamic sampling);
  2. one GRPO/PPO update on the groups with mixed rewards (`step.update_policy`);
  3. every `checkpoint_every` steps, and after the last, a `step-<N>/` checkpoint.
The job ends with the full weights in `final/`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evolution.rl.checkpoints import (
    latest_checkpoint,
    restore_checkpoint,
    save_checkpoint,
    save_final,
)
from evolution.rl.config import StepMetrics, TrainConfig, TrainResult
from evolution.rl.groups import draw_groups
from evolution.rl.policy import Policy
from evolution.rl.rewards import GroupReward, RewardFunction
from evolution.rl.samples import RecordedPrompt
from evolution.rl.step import update_policy

__all__ = ["OpenModels", "TrainingModels", "run_training"]


@dataclass(frozen=True)
class TrainingModels:
    """What a backend trains with.

    `sampler()` gives the current weights as a `Policy` that samples groups and is saved; for
    the torch backend it is the learner itself, for megatron an HF twin synced from it.
    """

    learner: Policy  # the model the loss is computed on
    sampler: Callable[[], Policy]
    reference: Policy | None  # the frozen start weights for a KL penalty
    optimiser: Any
    device: Any  # where the sampling generator lives


OpenModels = Callable[[Path, Path | None, TrainConfig], TrainingModels]
"""A backend: the models to train from the base, or from the checkpoint a job resumes."""

DrawGroups = Callable[[Policy, Sequence[RecordedPrompt], random.Random, Any], list[dict[str, Any]]]
"""A step's groups other than sampled and rewarded ones (on-policy distillation's)."""


def run_training(
    open_models: OpenModels,
    base: str | Path,
    out_dir: str | Path,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    config: TrainConfig,
    *,
    on_step: Callable[[StepMetrics], None] | None = None,
    on_checkpoint: Callable[[int, Path], None] | None = None,
    draw: DrawGroups | None = None,
) -> TrainResult:
    """Train the models `open_models` gives; resumes from the newest checkpoint in `out_dir`.

    Arguments as `evolution.rl.trainer.train`; `draw` replaces the sampled, rewarded groups.
    """
    import torch

    any_prompt = draw is not None or isinstance(reward, GroupReward)
    usable = _training_prompts(prompts, any_prompt=any_prompt)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    resume = latest_checkpoint(out_dir)
    models = open_models(Path(base), resume, config)
    rng = random.Random(config.seed)
    generator = torch.Generator(device=models.device).manual_seed(config.seed)
    start = 0 if resume is None else restore_checkpoint(resume, models.optimiser, rng, generator)
    history: list[StepMetrics] = []
    for step in range(start + 1, config.steps + 1):
        metrics = _step(step, models, usable, reward, config, rng, generator, draw)
        history.append(metrics)
        if on_step is not None:
            on_step(metrics)
        if step % config.checkpoint_every == 0 or step == config.steps:
            sampler, optimiser = models.sampler(), models.optimiser
            path = save_checkpoint(sampler, out_dir, step, optimiser, rng, generator, config)
            if on_checkpoint is not None:
                on_checkpoint(step, path)
    final = save_final(models.sampler(), out_dir, config)
    return TrainResult(checkpoint=final, steps=config.steps, resumed_from=start, history=history)


def _step(
    step: int,
    models: TrainingModels,
    usable: Sequence[RecordedPrompt],
    reward: RewardFunction,
    config: TrainConfig,
    rng: random.Random,
    generator: Any,
    draw: DrawGroups | None,
) -> StepMetrics:
    """Sample the step's groups with the current weights, then update the learner on them."""
    began = time.perf_counter()
    if draw is not None:
        groups = draw(models.sampler(), usable, rng, generator)
    else:
        groups = draw_groups(models.sampler(), usable, rng, reward, config, generator)
    metrics = update_policy(models.learner, models.reference, models.optimiser, groups, config)
    return StepMetrics(step=step, seconds=time.perf_counter() - began, **metrics)


def _training_prompts(
    prompts: Sequence[RecordedPrompt], *, any_prompt: bool
) -> list[RecordedPrompt]:
    """The prompts with a reference action (all of them where the reward needs none: a judge,
    a teacher); a clear error when there is none."""
    usable = [p for p in prompts if p.reference is not None or any_prompt]
    if not usable:
        raise ValueError(
            "no training prompt has a reference action: the window holds no rewarded tool "
            "call to learn from"
        )
    return usable
