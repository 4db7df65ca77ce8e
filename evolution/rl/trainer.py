"""Train a policy on recorded prompts: the one entry point, whichever backend runs the job.

`TrainConfig.backend` picks the module that supplies the models: `torch`
(`evolution.rl.backends.torch`, CPU or one GPU) or `megatron` (`evolution.rl.backends.megatron`,
GPU workers with megatron-core). Both run the same loop (`evolution.rl.loop`) and write the same
checkpoints (`evolution.rl.checkpoints`), so a job resumes the same way on either. The
offline objectives (SFT, DPO, IPO) train on fixed data instead: `evolution.rl.offline`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from evolution.rl.config import StepMetrics, TrainConfig, TrainResult
from evolution.rl.loop import DrawGroups, OpenModels, run_training
from evolution.rl.rewards import RewardFunction
from evolution.rl.samples import RecordedPrompt

__all__ = ["open_models", "train"]


def train(
    base: str | Path,
    out_dir: str | Path,
    prompts: Sequence[RecordedPrompt],
    reward: RewardFunction,
    config: TrainConfig,
    *,
    on_step: Callable[[StepMetrics], None] | None = None,
    on_checkpoint: Callable[[int, Path], None] | None = None,
    teacher: str | Path | None = None,
) -> TrainResult:
    """Train the policy in `base` on `prompts`; resumes from the newest checkpoint in `out_dir`.

    Args:
        base: the parent version's checkpoint directory.
        out_dir: where `step-<N>/` checkpoints and the final `final/` directory go.
        prompts: the training prompts; those without a reference are skipped.
        reward: the verifiable reward of a sampled completion.
        on_step / on_checkpoint: progress callbacks (heartbeats, MLflow, a progress bar).
        teacher: the checkpoint the objective "distill" distils from (sharing the tokenizer);
            then every prompt trains, with or without a reference.
    """
    return run_training(
        open_models(config),
        base,
        out_dir,
        prompts,
        reward,
        config,
        on_step=on_step,
        on_checkpoint=on_checkpoint,
        draw=_distillation(teacher, config),
    )


def _distillation(teacher: str | Path | None, config: TrainConfig) -> DrawGroups | None:
    """On-policy distillation's step, when the objective is "distill"."""
    if config.objective.kind != "distill":
        return None
    if teacher is None:
        raise ValueError("on-policy distillation needs a teacher checkpoint (distill_from)")
    if config.backend != "torch":
        raise ValueError("on-policy distillation runs on the torch backend only")
    from evolution.rl.data.distillation import distillation_draw
    from evolution.rl.policy import Policy

    return distillation_draw(Policy.load(teacher, device=config.device), config)


def open_models(config: TrainConfig) -> OpenModels:
    """The models of `config.backend`; its module is imported only when a job uses it."""
    if config.backend == "megatron":
        from evolution.rl.backends.megatron import megatron_models  # GPU workers only

        return megatron_models(config)
    from evolution.rl.backends.torch import torch_models

    return torch_models
