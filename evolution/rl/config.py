"""A training job's knobs and what it reports: `TrainConfig` in, `StepMetrics` and
`TrainResult` out, the same for every backend."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from evolution.rl.objectives import ObjectiveConfig

__all__ = ["LoraSettings", "StepMetrics", "TrainConfig", "TrainResult"]


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
    tokens: int = 0  # completion tokens the loss read (offline objectives)
    accuracy: float | None = None  # preference objectives: pairs whose chosen leads


@dataclass(frozen=True)
class TrainResult:
    checkpoint: Path  # the final weights, a full HF checkpoint (LoRA merged)
    steps: int
    resumed_from: int  # the step the job resumed from, 0 for a fresh start
    history: list[StepMetrics]
