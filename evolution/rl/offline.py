"""The offline objectives' training: SFT on demonstrations, DPO or IPO on preference pairs.

No sampling: each step reads the next `prompts_per_step` examples of a seeded shuffle of the
data (reshuffled each epoch, so every example is read once an epoch, as TRL's trainers read
theirs) and takes one optimiser step on their loss (`evolution.rl.objectives.sft_loss` /
`preference_loss`). The models come from the same backend as RL's (`TrainConfig.backend`,
LoRA or full weights), the checkpoints are RL's (`step-<N>/`, `final/`), so an offline job
resumes the same way. Drawing with replacement instead read some pairs four or five times
and others never, and DPO then collapsed the tiny model's tool-call arguments on two seeds
of three (`benchmarks/trainers.py`).
DPO and IPO compare with the frozen start weights (the backend's reference).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evolution.rl.checkpoints import (
    latest_checkpoint,
    restore_checkpoint,
    save_checkpoint,
    save_final,
)
from evolution.rl.config import StepMetrics, TrainConfig, TrainResult
from evolution.rl.data.preferences import PreferencePair
from evolution.rl.loop import TrainingModels
from evolution.rl.objectives import preference_loss, sft_loss
from evolution.rl.policy import Policy
from evolution.rl.sft import Demonstration

__all__ = ["train_offline"]

Example = Demonstration | PreferencePair


def train_offline(
    base: str | Path,
    out_dir: str | Path,
    examples: Sequence[Example],
    config: TrainConfig,
    *,
    on_step: Callable[[StepMetrics], None] | None = None,
) -> TrainResult:
    """Train `base` with `config.objective` (sft: demonstrations; dpo/ipo: pairs)."""
    import torch

    from evolution.rl.trainer import open_models

    _check(examples, config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    resume = latest_checkpoint(out_dir)
    models = open_models(config)(Path(base), resume, config)
    rng = random.Random(config.seed)
    generator = torch.Generator(device=models.device).manual_seed(config.seed)
    start = 0 if resume is None else restore_checkpoint(resume, models.optimiser, rng, generator)
    history = []
    for step in range(start + 1, config.steps + 1):
        batch = _batch(examples, step, config.prompts_per_step, config.seed)
        history.append(metrics := _step(step, models, batch, config))
        if on_step is not None:
            on_step(metrics)
        if step % config.checkpoint_every == 0 or step == config.steps:
            sampler = models.sampler()
            save_checkpoint(sampler, out_dir, step, models.optimiser, rng, generator, config)
    final = save_final(models.sampler(), out_dir, config)
    return TrainResult(checkpoint=final, steps=config.steps, resumed_from=start, history=history)


def _batch(examples: Sequence[Example], step: int, size: int, seed: int) -> list[Example]:
    """The examples step `step` reads: a function of the step alone, so a resumed job
    reads what it would have read."""
    count = len(examples)
    positions = [divmod(p, count) for p in range((step - 1) * size, step * size)]
    return [examples[_order(count, seed, epoch)[index]] for epoch, index in positions]


@functools.lru_cache(maxsize=4)
def _order(count: int, seed: int, epoch: int) -> tuple[int, ...]:
    return tuple(random.Random(f"{seed}:{epoch}").sample(range(count), count))


def _check(examples: Sequence[Example], config: TrainConfig) -> None:
    """SFT reads demonstrations; DPO and IPO read pairs, and demonstrations beside them
    (their likelihood, as RPO's chosen answers: the rewarded calls that anchor what the
    model already does right while the pairs move what it gets wrong)."""
    kind = config.objective.kind
    if kind not in ("sft", "dpo", "ipo"):
        raise ValueError(f"{kind} is not an offline objective: use evolution.rl.trainer.train")
    wanted = (Demonstration,) if kind == "sft" else (PreferencePair, Demonstration)
    if not examples:
        raise ValueError(f"no {wanted[0].__name__.lower()}s to train {kind} on")
    if not all(isinstance(e, wanted) for e in examples):
        raise ValueError(f"{kind} trains on {' and '.join(w.__name__ + 's' for w in wanted)} only")
    if kind != "sft" and not any(isinstance(e, PreferencePair) for e in examples):
        raise ValueError(f"no preference pairs to train {kind} on")


def _step(step: int, models: TrainingModels, batch: list[Any], config: TrainConfig) -> StepMetrics:
    import torch

    began = time.perf_counter()
    learner = models.learner
    learner.model.train()
    models.optimiser.zero_grad()
    losses, accuracies, tokens = [], [], 0
    for example in batch:
        if isinstance(example, PreferencePair):
            loss, accuracy, read = _pair_loss(learner, models.reference, example, config)
            accuracies.append(accuracy)
        else:
            loss, read = _demonstration_loss(learner, example)
        (loss / len(batch)).backward()
        losses.append(float(loss.detach()))
        tokens += read
    torch.nn.utils.clip_grad_norm_(learner.model.parameters(), 1.0)
    models.optimiser.step()
    learner.model.eval()
    return StepMetrics(
        step=step,
        loss=sum(losses) / len(losses),
        reward=0.0,
        kl=0.0,
        clip_fraction=0.0,
        importance_weight=1.0,
        groups_used=len(batch),
        seconds=time.perf_counter() - began,
        tokens=tokens,
        accuracy=sum(accuracies) / len(accuracies) if accuracies else None,
    )


def _completion_ids(policy: Policy, text: str) -> list[int]:
    return policy.tokenizer.encode(text, add_special_tokens=False) + [policy.eos_id]


def _demonstration_loss(policy: Policy, demo: Demonstration) -> tuple[Any, int]:
    completion = _completion_ids(policy, demo.completion)
    prompt = policy.prompt_ids(demo.messages, demo.tools)
    logprobs, mask = policy.token_logprobs(prompt, [completion], grad=True)
    return sft_loss(logprobs, mask), len(completion)


def _pair_loss(
    policy: Policy, reference: Policy | None, pair: PreferencePair, config: TrainConfig
) -> tuple[Any, float, int]:
    import torch

    prompt = policy.prompt_ids(pair.prompt.messages, pair.prompt.tools or None)
    both = [_completion_ids(policy, pair.chosen), _completion_ids(policy, pair.rejected)]
    logprobs, mask = policy.token_logprobs(prompt, both, grad=True)
    assert reference is not None  # the backends open one for dpo and ipo
    with torch.no_grad():
        ref, _ = reference.token_logprobs(prompt, both)
    sums, ref_sums = logprobs.sum(dim=1), ref.sum(dim=1)
    objective = config.objective
    terms = preference_loss(
        sums[:1],
        sums[1:],
        ref_sums[:1],
        ref_sums[1:],
        beta=objective.beta,
        kind="ipo" if objective.kind == "ipo" else "dpo",
        chosen_nll=sft_loss(logprobs[:1], mask[:1]) if objective.chosen_nll else None,
        nll_weight=objective.chosen_nll,
    )
    return terms.loss, terms.accuracy, len(both[0]) + len(both[1])
