"""How a weights change trains, read off the same window: SFT, DPO or GRPO, and why.

- near-zero competence (success below `PolicyConfig.sft_below`): GRPO learns only where a
  group's samples differ, and a policy that almost never succeeds rarely gives it a
  success; supervised targets first (a teacher's verified answers where one is configured,
  else the rewarded calls themselves);
- enough corrections (`dpo_min_corrections` llm calls the user corrected or the agent
  retried): each fix over the answer it fixed is a preference pair, and they exist exactly
  where rewarded references are scarce (the prompts the model fails most); DPO;
- otherwise, a verifiable reward and partial competence: GRPO.
"""

from __future__ import annotations

from typing import Literal

from evolution.decision.records import PolicyConfig
from evolution.window import WindowStats

__all__ = ["Algorithm", "choose_algorithm"]

Algorithm = Literal["sft", "dpo", "grpo"]


def choose_algorithm(
    stats: WindowStats, config: PolicyConfig, *, teacher: bool = False
) -> tuple[Algorithm, str]:
    """The algorithm a weights change on this window should train with, and why."""
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
