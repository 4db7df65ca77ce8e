"""A weights job's plan: the decision's algorithm, the data it trains on, and how it runs.

The decision names the algorithm from the window (`evolution.decision.algorithm`); the plan
builds that algorithm's data from the job's training export and prompts (never from the
held-out prompts) and falls back to GRPO, saying so, when there is none:

- dpo: pairs of (the user's correction) over (the answer it fixed), where the fix is a
  target no rewarded call of that request gives, and beside them the rewarded calls as
  demonstrations, whose likelihood holds what the model already does right. A retry's fix
  is already a rewarded call of the same request: when every pair is a retry, the job
  trains SFT on the rewarded calls instead, and says so (below);
- sft: the rewarded calls as demonstrations, plus a teacher's verified answers to the
  failed steps where the agent has a teacher;
- distill: the student's own samples of every training prompt, with or without a reference,
  scored token by token by the local teacher (`distill_from`);
- grpo: groups sampled on the prompts (ppo where the agent's settings say so).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evolution.rl.config import StepMetrics, TrainConfig, TrainResult
from evolution.rl.data import Teacher, call_text, correction_pairs, teacher_targets
from evolution.rl.rewards import RewardFunction, ToolCallReward
from evolution.rl.samples import RecordedPrompt
from evolution.rl.sft import Demonstration

__all__ = ["TrainingPlan", "training_plan"]


@dataclass(frozen=True)
class TrainingPlan:
    """What a weights job trains with; `offline` is the offline objective (None: RL)."""

    algorithm: str
    reason: str
    counts: dict[str, int]
    prompts: list[RecordedPrompt]
    examples: list[Any] = field(default_factory=list)
    offline: str | None = None
    teacher: str | None = None  # the checkpoint "distill" distils from

    @property
    def trains_as(self) -> str | None:
        """The objective that overrides the agent's RL one (None: that one)."""
        return self.offline or ("distill" if self.teacher else None)

    @property
    def summary(self) -> str:
        return ", ".join(f"{n} {kind}" for kind, n in self.counts.items())

    def run(
        self,
        base: Path,
        out_dir: Path,
        reward: RewardFunction,
        config: TrainConfig,
        on_step: Callable[[StepMetrics], None] | None = None,
    ) -> TrainResult:
        """Train `base` into `out_dir` as planned (`config` made with `offline`)."""
        if self.offline is not None:
            from evolution.rl.offline import train_offline

            return train_offline(base, out_dir, self.examples, config, on_step=on_step)
        from evolution.rl.trainer import train

        return train(
            base, out_dir, self.prompts, reward, config, on_step=on_step, teacher=self.teacher
        )


def training_plan(
    algorithm: str | None,
    reason: str | None,
    records: Sequence[dict[str, Any]],
    train_prompts: Sequence[RecordedPrompt],
    held_out: Sequence[RecordedPrompt],
    *,
    teacher: Teacher | None = None,
    objective: str = "grpo",
    distill_from: str | None = None,
    unreferenced: Sequence[RecordedPrompt] = (),
) -> TrainingPlan:
    """The plan for the decision's `algorithm` (None: the agent's RL `objective`) on the
    job's data; `unreferenced` are training prompts without a rewarded reference (only
    distillation trains on them here)."""
    rl = TrainingPlan(
        algorithm=objective,
        reason=reason
        if algorithm in (None, objective) and reason
        else f"{objective} on the verifiable reward, as the agent's training settings say",
        counts={"prompts": len(train_prompts)},
        prompts=list(train_prompts),
    )
    hidden = {p.event_id for p in held_out}
    if algorithm == "dpo":
        return _preference_plan(rl, reason, records, train_prompts, hidden, teacher)
    if algorithm == "distill":
        if distill_from is None:
            return _fallen_back(rl, "distill", "the agent has no teacher to distil from")
        prompts = [*train_prompts, *(p for p in unreferenced if p.event_id not in hidden)]
        counts = {"prompts": len(prompts), "unreferenced": len(prompts) - len(train_prompts)}
        return TrainingPlan("distill", reason or "", counts, prompts, teacher=distill_from)
    if algorithm == "sft":
        demos = _demonstrations(train_prompts, teacher)
        if demos:
            counts = {"demonstrations": len(demos)}
            return TrainingPlan("sft", reason or "", counts, list(train_prompts), demos, "sft")
        return _fallen_back(rl, "sft", "no verified answer to fine-tune on")
    return rl


def _preference_plan(
    rl: TrainingPlan,
    reason: str | None,
    records: Sequence[dict[str, Any]],
    train_prompts: Sequence[RecordedPrompt],
    hidden: set[str],
    teacher: Teacher | None,
) -> TrainingPlan:
    """DPO on the pairs whose fix no rewarded call of the request gives (a later turn's
    correction), with the rewarded calls as demonstrations beside them; SFT on those calls
    when every pair's fix is one of them already (a retry).

    Measured on the demo's own windows (docs/demo-runs.md): RPO on retry pairs alone lifted
    the new wave's right-tool rate 0.36 -> 0.53-0.66 but cut the usual requests' from 0.99 to
    0.66-0.90, since pushing a wrong call of one request down pushes the same call down
    where it is right; SFT on the rewarded calls reached 0.82-0.85 with the usual ones kept.
    """
    pairs = [p for p in correction_pairs(records) if p.prompt.event_id not in hidden]
    fresh = [p for p in pairs if p.prompt.reference is None]
    demos = _demonstrations(train_prompts, teacher)
    if fresh:
        counts = {"pairs": len(fresh), "demonstrations": len(demos)}
        return TrainingPlan(
            "dpo", reason or "", counts, list(train_prompts), [*fresh, *demos], "dpo"
        )
    if pairs and demos:
        why = (
            f"the decision chose dpo, but each of the {len(pairs)} pairs is a retry whose fix is "
            "already a rewarded call of the same request; no correction gave a target a "
            f"rewarded call does not, so SFT on the {len(demos)} rewarded calls learns the "
            "fixes without pushing right calls of other requests down"
        )
        counts = {"demonstrations": len(demos)}
        return TrainingPlan("sft", why, counts, list(train_prompts), demos, "sft")
    return _fallen_back(rl, "dpo", "no corrected answer has a rewarded fix to pair it with")


def _demonstrations(
    prompts: Sequence[RecordedPrompt], teacher: Teacher | None
) -> list[Demonstration]:
    """The rewarded calls as demonstrations, and a teacher's verified answers."""
    demos = [
        Demonstration(
            p.messages,
            call_text(p.reference["name"], p.reference.get("arguments")),
            p.tools or None,
        )
        for p in prompts
        if p.reference is not None
    ]
    if teacher is not None:
        demos += teacher_targets(prompts, teacher, ToolCallReward())
    return demos


def _fallen_back(plan: TrainingPlan, algorithm: str, why: str) -> TrainingPlan:
    return TrainingPlan(
        algorithm=plan.algorithm,
        reason=f"the decision chose {algorithm}, but {why}: {plan.reason}",
        counts=plan.counts,
        prompts=plan.prompts,
    )
