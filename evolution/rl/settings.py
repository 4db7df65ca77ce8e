"""How an agent's weight evolutions train: part of its evolution settings.

Validated where people set it (`evoplane agent configure`, the control API), turned into the
trainer's `TrainConfig` when a job starts. The defaults are the ones measured on the tiny
model on a 2-core CPU (benchmarks and tests/evolution/rl).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evolution.rl.config import LoraSettings, TrainConfig
from evolution.rl.objectives import ObjectiveConfig

__all__ = ["JudgeSettings", "TeacherSettings", "TrainingSettings"]


class TeacherSettings(BaseModel):
    """An OpenAI-compatible model that answers failed steps for SFT targets.

    Args:
        base_url: up to `/v1` (the endpoint is `<base_url>/chat/completions`).
        api_key_env: the environment variable of the worker that holds its key, if any.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api_key_env: str | None = None


class JudgeSettings(TeacherSettings):
    """An OpenAI-compatible model that ranks groups of answers where explicit rewards are
    sparse (`evolution.rl.data.judge`), trusted only as far as it agrees with them.

    Args:
        min_agreement: the share of recorded answer pairs (of one request, with different
            explicit rewards) it must order as their rewards do before it may reward.
        min_pairs: fewer such pairs than this and its agreement is not measured well enough
            to trust.
        max_groups: recorded answer groups it is measured on (each costs one judge call).
    """

    min_agreement: float = Field(default=0.75, ge=0.5, le=1.0)
    min_pairs: int = Field(default=20, ge=1)
    max_groups: int = Field(default=50, ge=1)


class TrainingSettings(BaseModel):
    """Args:
    objective: grpo (group-normalised advantages) or ppo (clip with a KL penalty).
    lora_rank: train a LoRA adapter of this rank (merged into the result); None trains all
        weights, which the tiny model wants.
    holdout: the share of recorded prompts kept out of training to measure the candidate.
    format_credit: the training reward of a well-formed call of an offered but wrong tool
        (the right one earns 1, anything else 0), so that while the decision is learned a
        valid wrong call beats a broken one; byte-level models otherwise drift into blends
        such as "loncel_order". The held-out reward stays strict.
    fill_draws: with dynamic sampling, extra prompts a step may draw while fewer than
        `prompts_per_step` of its groups have mixed rewards (the only ones that teach).
    backend: torch (CPU or one GPU) or megatron (GPU workers with megatron-core).
    beta: DPO's pull towards the parent's weights, when the decision chose DPO.
    chosen_nll: the weight of the fix's own negative log-likelihood added to DPO's loss
        (RPO): it keeps the chosen answer's likelihood from falling with the rejected
        one's. Plain DPO (0) collapsed on two of five seeds of the benchmark's corrections,
        RPO on none (benchmarks/RESULTS.md, "Trainers side by side").
    teacher: a model to replay failed steps with for SFT targets (None: none).
    judge: a model that ranks sampled groups of prompts without a rewarded reference, used
        by GRPO/PPO only when its agreement with explicit rewards passes (None: none).
    distill_from: a local checkpoint that shares the agent model's tokenizer, whose
        logprobs on the student's own samples train on-policy distillation (None: none).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    objective: Literal["grpo", "ppo"] = "grpo"
    steps: int = Field(default=100, ge=1, le=100_000)
    prompts_per_step: int = Field(default=8, ge=1)
    group_size: int = Field(default=8, ge=2)
    learning_rate: float = Field(default=3e-4, gt=0, lt=1)
    max_new_tokens: int = Field(default=96, ge=1)
    temperature: float = Field(default=1.0, gt=0)
    eps_low: float = Field(default=0.2, gt=0, lt=1)
    eps_high: float = Field(default=0.28, gt=0)
    kl_coef: float = Field(default=0.0, ge=0)
    format_credit: float = Field(default=0.1, ge=0, lt=1)
    dynamic_sampling: bool = True
    fill_draws: int = Field(default=0, ge=0)
    lora_rank: int | None = Field(default=None, ge=1)
    checkpoint_every: int = Field(default=25, ge=1)
    holdout: float = Field(default=0.2, ge=0, lt=1)
    seed: int = 0
    backend: Literal["torch", "megatron"] = "torch"
    threads: int | None = Field(default=None, ge=1)
    beta: float = Field(default=0.1, gt=0)
    chosen_nll: float = Field(default=1.0, ge=0)
    teacher: TeacherSettings | None = None
    judge: JudgeSettings | None = None
    distill_from: str | None = Field(default=None, min_length=1)

    def train_config(
        self, *, device: str = "cpu", algorithm: Literal["sft", "dpo", "distill"] | None = None
    ) -> TrainConfig:
        """The trainer's config; `algorithm` (the decision's, when not RL) overrides
        `objective`."""
        kind = algorithm or self.objective
        return TrainConfig(
            objective=ObjectiveConfig(
                kind=kind,
                eps_low=self.eps_low,
                eps_high=self.eps_high,
                kl_coef=self.kl_coef if kind != "ppo" else max(self.kl_coef, 0.01),
                beta=self.beta,
                chosen_nll=self.chosen_nll,
            ),
            steps=self.steps,
            prompts_per_step=self.prompts_per_step,
            group_size=self.group_size,
            learning_rate=self.learning_rate,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            # Distillation's signal is the teacher's, per token: every group carries one.
            dynamic_sampling=self.dynamic_sampling and kind != "distill",
            fill_draws=self.fill_draws,
            lora=LoraSettings(rank=self.lora_rank, alpha=2 * self.lora_rank)
            if self.lora_rank
            else None,
            checkpoint_every=self.checkpoint_every,
            seed=self.seed,
            backend=self.backend,
            device=device,
            threads=self.threads,
        )
