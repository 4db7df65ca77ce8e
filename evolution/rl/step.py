"""The GRPO/PPO update: one optimiser step on a step's groups (token-mean loss, gradients
accumulated group by group), and the frozen reference the KL penalty compares with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evolution.rl.config import TrainConfig
from evolution.rl.groups import mixed
from evolution.rl.objectives import policy_loss
from evolution.rl.policy import Policy

__all__ = ["reference_policy", "update_policy"]


def update_policy(
    learner: Policy, reference: Any, optimiser: Any, groups: list[dict], config: TrainConfig
) -> dict[str, Any]:
    """One optimiser step on the groups with mixed rewards; returns the step's metrics.

    `learner` is the model the loss is computed on (for the megatron backend, not the one
    that sampled).
    """
    import torch

    rewards = [r for g in groups for r in g["rewards"]]
    kept = mixed(groups) if config.dynamic_sampling else set(range(len(groups)))
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
        "tokens": sum(len(c) for i in kept for c in groups[i]["completions"]),
    }


def reference_policy(base: Path, config: TrainConfig, device: str) -> Policy | None:
    """The frozen start weights (also after a resume), when the objective has a KL penalty
    or compares with them (DPO, IPO)."""
    kind = config.objective.kind
    wants = config.reference_kl or kind in ("ppo", "dpo", "ipo") or config.objective.kl_coef
    if not wants:
        return None
    frozen = Policy.load(base, device=device)
    frozen.model.requires_grad_(False).eval()
    return frozen


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
    advantages = torch.tensor(_padded(group["advantages"], width), device=logprobs.device)
    # One update per batch: the proximal policy is the current weights before the step.
    return policy_loss(
        logprobs, logprobs.detach(), behaviour, advantages, mask, config.objective, ref
    )


def _padded(advantages: list, width: int) -> list:
    """Per-completion advantages as they are; per-token ones padded to `width`."""
    if not advantages or not isinstance(advantages[0], list):
        return advantages
    return [a + [0.0] * (width - len(a)) for a in advantages]
