"""Within `weights`, the decision chooses the algorithm from the window's evidence and says why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evolution.decision import Action, PolicyConfig, decide, fall_back, fallbacks
from evolution.window import FailureKind
from tests.evolution.test_decision import cluster, rate, window

WIDE = cluster(
    FailureKind.TOOL_ROUTING, "any->other", trajectories=120, tenants=4, task_types=3, tool_setups=3
)


def weights_window(successes: int, corrections: int, trajectories: int = 400):
    return window(
        trajectories=trajectories,
        successes=successes,
        failures=[WIDE],
        correction_rate=rate(corrections, trajectories * 3),
    )


def test_partial_competence_with_few_corrections_trains_grpo() -> None:
    record = decide(weights_window(successes=240, corrections=5))
    assert record.action is Action.WEIGHTS and record.algorithm == "grpo"
    assert "partial competence (60% success)" in record.algorithm_reason
    assert "5 corrections (fewer than 20)" in record.algorithm_reason


def test_corrections_train_dpo() -> None:
    record = decide(weights_window(successes=240, corrections=45))
    assert record.algorithm == "dpo"
    assert record.algorithm_reason.startswith("45 answers were corrected or retried")


@pytest.mark.parametrize("teacher", [False, True])
def test_near_zero_competence_trains_sft_first_whatever_the_corrections(teacher) -> None:
    record = decide(weights_window(successes=12, corrections=300), teacher=teacher)
    assert record.algorithm == "sft"
    assert "near-zero competence (3% success, below 10%)" in record.algorithm_reason
    source = "a teacher's verified answers" if teacher else "the rewarded calls"
    assert record.algorithm_reason.endswith(f"SFT on {source} first")


def test_only_a_weights_decision_names_an_algorithm_but_a_fallback_to_weights_gets_it() -> None:
    narrow = cluster(FailureKind.MISSING_FACT, "a fact", trajectories=200)
    wide = WIDE.model_copy(update={"trajectories": 60, "count": 60, "share": 0.15})
    record = decide(window(failures=[narrow, wide], correction_rate=rate(40, 1200)))
    assert record.action is not Action.WEIGHTS and record.algorithm is None
    assert record.signals["weights_algorithm"] == "dpo"
    to = next(s for s in fallbacks(record, PolicyConfig()) if s.action is Action.WEIGHTS)
    assert fall_back(record, to, "memory could not help").algorithm == "dpo"


def test_corrections_and_a_teacher_that_scores_the_students_tokens_train_distillation() -> None:
    record = decide(weights_window(successes=240, corrections=45), distill_teacher=True)
    assert record.algorithm == "distill"
    assert record.algorithm_reason.startswith("45 answers were corrected or retried")
    assert "a teacher scores the student's own tokens" in record.algorithm_reason
    # A teacher that only answers (an OpenAI-compatible one) gives no logprobs: DPO.
    assert decide(weights_window(240, 45), teacher=True).algorithm == "dpo"
    # Without corrections the verifiable reward still trains: GRPO.
    assert decide(weights_window(240, 5), distill_teacher=True).algorithm == "grpo"


@given(st.integers(0, 400), st.integers(0, 1200), st.booleans())
def test_the_choice_follows_its_thresholds(successes, corrections, distill_teacher) -> None:
    config = PolicyConfig()
    record = decide(
        weights_window(successes, corrections),
        config,
        force=Action.WEIGHTS,
        distill_teacher=distill_teacher,
    )
    if successes / 400 < config.sft_below:
        assert record.algorithm == "sft"
    elif corrections >= config.dpo_min_corrections:
        assert record.algorithm == ("distill" if distill_teacher else "dpo")
    else:
        assert record.algorithm == "grpo"
