"""How a weights change trains, read off the same window: SFT, DPO or GRPO, and why.

- near-zero competence (success below `PolicyConfig.sft_below`): GRPO learns only where a
  group's samples differ, and a policy that almost never succeeds rarely gives it a
  success; supervised targets first (a teacher's verified answers where one is configured,
  else the rewarded calls themselves);
- enough corrections (`dpo_min_corrections` llm calls the user corrected or the agent
  retried) and a teacher that scores the student's own tokens (`distill_from`, local weights
  sharing the tokenizer): on-policy distillation, which needs no rewarded reference at all and
  reads a signal on every token of the student's own answers, where the corrections show it
  goes wrong;
- enough corrections without such a teacher: each fix over the answer it fixed is a
  preference pair, and they exist exactly where rewarded references are scarce (the prompts
  the model fails most); DPO;
- otherwise, a verifiable reward and partial competence: GRPO.
"""

from __future__ import annotations

from typing import Literal

from evolution.decision.records import PolicyConfig
from evolution.window import WindowStats

__all__ = ["Algorithm", "choose_algorithm"]

Algorithm = Literal["sft", "distill", "dpo", "grpo"]


def choose_algorithm(
    stats: WindowStats,
    config: PolicyConfig,
    *,
    teacher: bool = False,
    distill_teacher: bool = False,
) -> tuple[Algorithm, str]:
    """The algorithm a weights change on this window should train with, and why.

    Args:
        teacher: an OpenAI-compatible teacher answers failed steps (SFT targets).
        distill_teacher: a local teacher gives logprobs of the student's own tokens.
    """
    competence = stats.task_success.rate
    if competence is None:
        competence = stats.reward.mean
    corrections = stats.correction_rate.successes
    if competence is not None and competence < config.sft_below:
        source = "a teacher's verified answers" if teacher else "the rewarded calls"
        return "sft", (
            f"near-zero competence ({competence:.0%} success, below "
            f"{config.sft_below:.0%}): sampled groups would rarely hold a success for "
            f"GRPO to learn from, so SFT on {source} first"
        )
    if corrections >= config.dpo_min_corrections and distill_teacher:
        return "distill", (
            f"{corrections} answers were corrected or retried (at least "
            f"{config.dpo_min_corrections}) and a teacher scores the student's own tokens: "
            "on-policy distillation corrects the student where its own answers go, token by "
            "token, without waiting for rewarded references"
        )
    if corrections >= config.dpo_min_corrections:
        return "dpo", (
            f"{corrections} answers were corrected or retried (at least "
            f"{config.dpo_min_corrections}): each fix over the answer it fixed is a preference "
            "pair, where rewarded references are scarcest"
        )
    shown = "unknown" if competence is None else f"{competence:.0%}"
    return "grpo", (
        f"partial competence ({shown} success) and {corrections} corrections (fewer than "
        f"{config.dpo_min_corrections}): GRPO on the verifiable reward"
    )
