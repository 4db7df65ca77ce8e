"""A weights job trains with the decision's algorithm on that algorithm's data, never on its
held-out prompts, and falls back to RL, saying why, when the data is not there."""

from __future__ import annotations

from evolution.rl.data import PreferencePair, call_text, correction_pairs
from evolution.rl.plan import training_plan
from evolution.rl.samples import record_prompts
from evolution.rl.sft import Demonstration
from tests.evolution.rl.test_data import WRONG, recorded, records  # noqa: F401 (a fixture)


class AnswersCancel:
    def __call__(self, prompt, n):
        return ["no idea", call_text("cancel_order", WRONG)]


def job_data(engine):
    data = records(engine)
    prompts = [p for r in data for p in record_prompts(r)]
    return data, [p for p in prompts if p.reference is not None]


def test_dpo_trains_on_the_corrections_pairs_beside_the_rewarded_calls(recorded) -> None:  # noqa: F811
    data, usable = job_data(recorded)
    plan = training_plan("dpo", "45 answers were corrected", data, usable, [])
    # Two pairs: a retry (its fix is a rewarded call of the same request, already a
    # demonstration) and a correction (a target no rewarded call of the request gives).
    assert (plan.algorithm, plan.offline) == ("dpo", "dpo")
    assert plan.counts == {"pairs": 1, "demonstrations": len(usable)}
    (pair,) = [e for e in plan.examples if isinstance(e, PreferencePair)]
    assert pair.source == "correction" and pair.prompt.reference is None
    assert len(plan.examples) == 1 + len(usable)
    assert plan.reason == "45 answers were corrected"
    # Held out, the corrected prompts leave no pair: the job trains GRPO and says why.
    wrong = [p for p in (p for r in data for p in record_prompts(r)) if p.reward == 0.0]
    fallen = training_plan("dpo", "x", data, usable, wrong)
    assert (fallen.algorithm, fallen.offline) == ("grpo", None)
    assert fallen.counts == {"prompts": len(usable)}
    assert fallen.reason.startswith("the decision chose dpo, but no corrected answer")


def test_when_every_pair_is_a_retry_the_job_trains_sft_on_the_rewarded_calls(recorded) -> None:  # noqa: F811
    data, usable = job_data(recorded)
    retries = [r for r in data if any(_is_retry(r, p) for p in correction_pairs([r]))]
    assert len(retries) == 1
    plan = training_plan("dpo", "45 answers were corrected or retried", retries, usable, [])
    assert (plan.algorithm, plan.offline) == ("sft", "sft")
    assert plan.counts == {"demonstrations": len(usable)}
    assert all(isinstance(e, Demonstration) for e in plan.examples)
    assert plan.reason.startswith("the decision chose dpo, but each of the 1 pairs is a retry")


def _is_retry(record, pair) -> bool:
    return pair.source == "retry"


def test_sft_trains_on_the_rewarded_calls_and_a_teachers_verified_answers(recorded) -> None:  # noqa: F811
    data, usable = job_data(recorded)
    alone = training_plan("sft", "near-zero competence", data, usable, [])
    assert alone.offline == "sft" and alone.counts == {"demonstrations": len(usable)}
    taught = training_plan("sft", "near-zero competence", data, usable, [], teacher=AnswersCancel())
    # The one failed prompt with a reference to verify against gains the teacher's answer.
    assert taught.counts == {"demonstrations": len(usable) + 1}
    assert all(d.completion == call_text("cancel_order", WRONG) for d in taught.examples)


def test_without_an_algorithm_the_agents_rl_objective_trains(recorded) -> None:  # noqa: F811
    data, usable = job_data(recorded)
    plan = training_plan(None, None, data, usable, [], objective="ppo")
    assert (plan.algorithm, plan.offline) == ("ppo", None)
    assert plan.prompts == usable and plan.examples == []


def test_distillation_trains_every_prompt_with_the_agents_teacher(recorded) -> None:  # noqa: F811
    data, usable = job_data(recorded)
    unreferenced = [p for r in data for p in record_prompts(r) if p.reference is None]
    plan = training_plan(
        "distill", "corrections", data, usable, [], distill_from="/w/t", unreferenced=unreferenced
    )
    assert (plan.algorithm, plan.offline, plan.trains_as, plan.teacher) == (
        "distill",
        None,
        "distill",
        "/w/t",
    )
    assert plan.prompts == [*usable, *unreferenced]
    assert plan.counts == {"prompts": len(usable) + len(unreferenced), "unreferenced": 1}
    # Without a teacher to distil from, the job trains GRPO and says why.
    fallen = training_plan("distill", "corrections", data, usable, [])
    assert (fallen.algorithm, fallen.trains_as) == ("grpo", None)
    assert fallen.reason.startswith("the decision chose distill, but the agent has no teacher")
