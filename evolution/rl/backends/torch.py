"""The torch backend: an HF model that samples and learns in one process, on CPU or one GPU.

Full fine-tuning, or a LoRA adapter (checkpointed alone, merged into the final weights).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evolution.rl.config import LoraSettings, TrainConfig
from evolution.rl.loop import TrainingModels
from evolution.rl.policy import Policy
from evolution.rl.step import reference_policy
from runtime.model.checkpoint import LOADING

__all__ = ["torch_models", "use_threads"]


def torch_models(base: Path, resume: Path | None, config: TrainConfig) -> TrainingModels:
    """The HF model to train (from `resume` when a job resumes), which also samples."""
    import torch

    use_threads(config.threads)
    policy = _trainable(base, resume, config)
    return TrainingModels(
        learner=policy,
        sampler=lambda: policy,
        reference=reference_policy(base, config, config.device),
        optimiser=torch.optim.AdamW(
            [p for p in policy.model.parameters() if p.requires_grad], lr=config.learning_rate
        ),
        device=policy.device,
    )


def use_threads(threads: int | None) -> None:
    """torch's CPU threads for a training job: `threads`, or every CPU this process may use.

    The setting is process-wide, and a worker's local engines may have set it to 1 (best for
    serving a small model to many callers, `EVOPLANE_LOCAL_THREADS`); a training job should
    not inherit that by accident.
    """
    import torch

    torch.set_num_threads(threads or len(os.sched_getaffinity(0)))


def _trainable(base: Path, resume: Path | None, config: TrainConfig) -> Policy:
    """The weights to train: a full checkpoint's own, or the base plus its LoRA adapter."""
    import torch

    torch.manual_seed(config.seed)
    full_resume = resume is not None and config.lora is None
    policy = Policy.load(resume if full_resume else base, device=config.device)
    if config.lora is not None:
        policy.model = _with_adapter(policy.model, resume, config.lora)
    policy.model.eval()
    return policy


def _with_adapter(model: Any, resume: Path | None, lora: LoraSettings) -> Any:
    """`model` with a trainable LoRA adapter: the checkpoint's on a resume, else a fresh one."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if resume is not None:
        with LOADING:  # built on the meta device like a checkpoint (see LOADING)
            return PeftModel.from_pretrained(model, resume / "adapter", is_trainable=True)
    adapter = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, adapter)
