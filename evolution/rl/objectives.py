"""Policy-gradient objectives: GRPO and PPO-clip, with a decoupled importance weight.

Served traffic is off-policy by the time it is trained on: the weights that produced it (the
*behaviour* policy, whose logprobs the gateway recorded) are older than the weights being
updated. Following AReaL's decoupled PPO, the clipped ratio is taken against the *proximal*
policy (the current weights before this update) and the gap between proximal and behaviour is
corrected by a separate, truncated importance weight:

    loss = - w * min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A),
    r = pi_theta / pi_prox,   w = min(pi_prox / pi_behav, w_max)   (per token)

With on-policy samples w = 1 and this is plain PPO/GRPO. `eps_high > eps_low` is DAPO's
clip-higher. GRPO's advantage is the group-normalised reward; PPO here uses the same
sequence-level advantage (no value model) with a KL penalty to the reference weights.

Beside them, the offline objectives that need no sampling: SFT (token-mean negative
log-likelihood of a target completion) and preference optimisation on (chosen, rejected)
pairs against frozen reference weights, DPO's sigmoid loss or IPO's squared one:

    h = (log pi(y_w) - log ref(y_w)) - (log pi(y_l) - log ref(y_l))
    DPO: -log sigmoid(beta * h)        IPO: (h - 1 / (2 * beta))^2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "NO_SIGNAL",
    "LossTerms",
    "ObjectiveConfig",
    "PreferenceTerms",
    "distillation_advantages",
    "group_advantages",
    "mixed_groups",
    "policy_loss",
    "preference_loss",
    "sft_loss",
]

NO_SIGNAL = 1e-6  # a group's reward spread (std) at or below this teaches nothing


@dataclass(frozen=True)
class ObjectiveConfig:
    """How the policy loss is formed.

    Args:
        kind: "grpo" (group-normalised advantages, KL optional), "ppo" (KL penalty on),
            "distill" (on-policy distillation: the policy loss with per-token advantages
            log teacher - log student on the student's samples, `distillation_advantages`),
            or an offline objective: "sft", "dpo" or "ipo" (`evolution.rl.offline`).
        eps_low / eps_high: the clip range of the ratio; eps_high > eps_low is clip-higher.
        kl_coef: weight of the KL penalty to the reference policy (k3 estimator).
        max_importance_weight: truncation of the behaviour correction w.
        normalise_std: divide group advantages by the group's reward std (GRPO); off gives
            Dr. GRPO's mean-only baseline.
        beta: DPO's / IPO's strength of the pull towards the reference weights.
        chosen_nll: weight of the chosen completion's token-mean negative log-likelihood
            added to DPO's / IPO's loss (RPO; TRL's `loss_type=["sigmoid", "sft"]`): it
            keeps the chosen answer's own likelihood from falling with the rejected one's,
            which pairs that share most of their tokens (two tool calls) otherwise allow.
    """

    kind: Literal["grpo", "ppo", "distill", "sft", "dpo", "ipo"] = "grpo"
    eps_low: float = 0.2
    eps_high: float = 0.2
    kl_coef: float = 0.0
    max_importance_weight: float = 5.0
    normalise_std: bool = True
    beta: float = 0.1
    chosen_nll: float = 0.0

    @property
    def offline(self) -> bool:
        """Whether the objective learns from fixed data (no sampling): SFT, DPO, IPO."""
        return self.kind in ("sft", "dpo", "ipo")


@dataclass(frozen=True)
class LossTerms:
    """The loss and what a person watches while it trains."""

    loss: Any
    policy: float
    kl: float
    clip_fraction: float
    importance_weight: float


def group_advantages(
    rewards: Sequence[float], groups: Sequence[Any], *, normalise_std: bool = True
) -> list[float]:
    """Each sample's reward minus its group's mean (over the group's std when asked).

    A group whose rewards are all equal (a spread of at most `NO_SIGNAL`) carries no signal:
    its advantages are 0.
    """
    stats = _group_stats(rewards, groups)
    advantages = []
    for reward, group in zip(rewards, groups, strict=True):
        mean, std = stats[group]
        centred = reward - mean if std > NO_SIGNAL else 0.0
        advantages.append(centred / std if normalise_std and centred else centred)
    return advantages


def distillation_advantages(teacher: Sequence[float], student: Sequence[float]) -> list[float]:
    """On-policy distillation's per-token advantages on a student's sample: log teacher -
    log student of each sampled token. Their mean is minus the sample's estimate of the
    reverse KL(student || teacher), and the policy gradient on them descends it token by
    token (each token's own term, as Thinking Machines' on-policy distillation does)."""
    return [float(t) - float(s) for t, s in zip(teacher, student, strict=True)]


def mixed_groups(rewards: Sequence[float], groups: Sequence[Any]) -> set[Any]:
    """The groups whose rewards differ (DAPO's dynamic sampling keeps only these)."""
    return {g for g, (_, std) in _group_stats(rewards, groups).items() if std > NO_SIGNAL}


def _group_stats(rewards: Sequence[float], groups: Sequence[Any]) -> dict[Any, tuple[float, float]]:
    """Each group's mean reward and standard deviation."""
    by_group: dict[Any, list[float]] = {}
    for reward, group in zip(rewards, groups, strict=True):
        by_group.setdefault(group, []).append(reward)
    stats = {}
    for group, values in by_group.items():
        mean = sum(values) / len(values)
        stats[group] = (mean, (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5)
    return stats


def policy_loss(
    logprobs: Any,
    proximal: Any,
    behaviour: Any,
    advantages: Any,
    mask: Any,
    config: ObjectiveConfig,
    reference: Any = None,
) -> LossTerms:
    """The token-mean policy loss over a batch of completions.

    Args:
        logprobs: [B, T] logprobs of the sampled tokens under the weights being trained.
        proximal: [B, T] the same under the weights before this update (no gradient).
        behaviour: [B, T] the logprobs recorded when the tokens were produced.
        advantages: [B] one advantage per completion, or [B, T] one per token (process
            rewards, on-policy distillation).
        mask: [B, T] 1 for real tokens.
        reference: [B, T] logprobs under the reference weights, for the KL penalty.
    """
    import torch

    proximal = proximal.detach()
    ratio = torch.exp(logprobs - proximal)
    weight = torch.exp(proximal - behaviour.detach()).clamp(max=config.max_importance_weight)
    adv = advantages if advantages.dim() == 2 else advantages[:, None]
    clipped = ratio.clamp(1.0 - config.eps_low, 1.0 + config.eps_high)
    per_token = -weight * torch.minimum(ratio * adv, clipped * adv)
    tokens = mask.sum().clamp(min=1.0)
    kl = torch.zeros((), device=logprobs.device)
    if reference is not None:
        # k3: an unbiased, always non-negative estimate of KL(pi_theta || pi_ref).
        delta = reference.detach() - logprobs
        kl = ((torch.exp(delta) - delta - 1.0) * mask).sum() / tokens
    coef = config.kl_coef if (config.kind == "ppo" or config.kl_coef) else 0.0
    policy = (per_token * mask).sum() / tokens
    loss = policy + coef * kl
    with torch.no_grad():
        clip_frac = (((ratio - clipped).abs() > 1e-6).float() * mask).sum() / tokens
        mean_w = (weight * mask).sum() / tokens
    return LossTerms(
        loss=loss,
        policy=float(policy.detach()),
        kl=float(kl.detach()),
        clip_fraction=float(clip_frac),
        importance_weight=float(mean_w),
    )


def sft_loss(logprobs: Any, mask: Any) -> Any:
    """Token-mean negative log-likelihood of target completions ([B, T] logprobs and mask)."""
    return -(logprobs * mask).sum() / mask.sum().clamp(min=1.0)


@dataclass(frozen=True)
class PreferenceTerms:
    """A preference loss and what a person watches: how far chosen leads rejected."""

    loss: Any
    margin: float  # mean beta * h: the implicit reward of chosen over rejected
    accuracy: float  # share of pairs whose chosen already leads (h > 0)


def preference_loss(
    chosen: Any,
    rejected: Any,
    reference_chosen: Any,
    reference_rejected: Any,
    *,
    beta: float,
    kind: Literal["dpo", "ipo"] = "dpo",
    chosen_nll: Any = None,
    nll_weight: float = 0.0,
) -> PreferenceTerms:
    """DPO's or IPO's loss over a batch of pairs, each argument a [B] tensor of sequence
    logprobs (the sum over a completion's tokens; the reference ones carry no gradient),
    plus `nll_weight` times `chosen_nll` (the chosen completions' `sft_loss`) when given."""
    import torch

    h = (chosen - reference_chosen.detach()) - (rejected - reference_rejected.detach())
    if kind == "ipo":
        losses = (h - 1.0 / (2.0 * beta)) ** 2
    else:
        losses = -torch.nn.functional.logsigmoid(beta * h)
    loss = losses.mean()
    if nll_weight and chosen_nll is not None:
        loss = loss + nll_weight * chosen_nll
    with torch.no_grad():
        margin = float((beta * h).mean())
        accuracy = float((h > 0).float().mean())
    return PreferenceTerms(loss=loss, margin=margin, accuracy=accuracy)
