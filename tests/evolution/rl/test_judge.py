"""The relative judge: its replies parsed strictly, its agreement with explicit rewards
counted pair by pair, and never a replacement for an explicit reward."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evolution.rl.data import RelativeJudge, agreement, call_text, with_explicit
from evolution.rl.data.judge import (
    JudgedReward,
    answer_groups,
    judge_reward,
    measure_agreement,
    parse_scores,
)
from evolution.rl.rewards import ToolCallReward
from evolution.rl.samples import RecordedPrompt
from tests.evolution.rl.test_data import WRONG, recorded, records  # noqa: F401 (a fixture)

NAMES = ("lookup_order", "cancel_order")

PROMPT = RecordedPrompt(
    event_id="e",
    tenant="acme",
    messages=[
        {"role": "system", "content": "You help with orders."},
        {"role": "user", "content": "kill my order"},
    ],
)


def test_the_judge_sees_the_conversation_and_every_answer_in_order() -> None:
    seen = []

    def complete(prompt: str) -> str:
        seen.append(prompt)
        return 'Sure. {"scores": [0.1, 0.9]}'

    scores = RelativeJudge(complete)(PROMPT, ["lookup it is", "cancelling"])
    assert scores == [0.1, 0.9]
    (prompt,) = seen
    assert "user: kill my order" in prompt and "system: You help with orders." in prompt
    assert prompt.index("lookup it is") < prompt.index("cancelling")


@pytest.mark.parametrize(
    "reply",
    [
        "no json here",
        '{"scores": [0.5]}',  # one score for two answers
        '{"scores": [0.5, 1.5]}',  # off the scale
        '{"scores": [0.5, true]}',
        '{"scores": "0.5, 0.5"}',
        '{"ranking": [1, 2]}',
        "[0.5, 0.5]",
    ],
)
def test_a_reply_without_a_score_per_answer_gives_none(reply) -> None:
    assert RelativeJudge(lambda _: reply)(PROMPT, ["a", "b"]) is None


@given(st.lists(st.floats(0, 1), min_size=1, max_size=8), st.text(max_size=20))
def test_scores_written_as_asked_are_read_back_whatever_surrounds_them(scores, chatter) -> None:
    chatter = chatter.replace("{", "").replace("}", "")
    reply = f"{chatter}{json.dumps({'scores': scores})}{chatter}"
    assert parse_scores(reply, len(scores)) == scores


def test_agreement_counts_pairs_with_different_explicit_rewards() -> None:
    judged = [[0.9, 0.2, 0.5], [0.4, 0.4]]
    explicit = [[1.0, 0.0, None], [1.0, 0.0]]
    found = agreement(judged, explicit)
    # Group 1: one rated pair, ordered alike; group 2: one pair the judge ties (half).
    assert (found.pairs, found.concordant, found.rate) == (2, 1.5, 0.75)
    assert agreement([[0.1, 0.9]], [[1.0, 0.0]]).rate == 0.0
    assert agreement([[0.1, 0.9]], [[1.0, 1.0]]).rate is None  # nothing to agree on


@given(st.lists(st.tuples(st.one_of(st.none(), st.floats(0, 1)), st.floats(0, 1)), max_size=10))
def test_an_explicit_reward_is_never_replaced(pairs) -> None:
    explicit = [e for e, _ in pairs]
    judged = [j for _, j in pairs]
    combined = with_explicit(explicit, judged)
    for e, j, c in zip(explicit, judged, combined, strict=True):
        assert c == (e if e is not None else j)
    assert with_explicit(explicit, None) == explicit


# --- the judge in the weights path: measured on recorded answers, gated, never overriding ---


def regenerated(engine) -> list[dict]:
    """The export of `test_data`'s conversations, with one rewarded cancel answering
    the very request the wrong lookup answered (a regenerate): three recorded answers to one
    request (the two conversations' first turns are the same), rated 0, 0 and 1."""
    data = records(engine)
    retry = next(r for r in data if len(r["steps"]) == 2 and r["steps"][1]["reward"] == 1.0)
    retry["steps"][1]["messages"] = retry["steps"][0]["messages"]
    return data


def scores_cancel(right: float, wrong: float):
    """A judge's reply: `right` for each answer that calls cancel_order, else `wrong`."""

    def complete(prompt: str) -> str:
        answers = prompt.split('<answer index="')[1:]
        return json.dumps({"scores": [right if "cancel_order" in a else wrong for a in answers]})

    return complete


def test_the_judge_is_measured_on_recorded_answers_to_the_same_request(recorded) -> None:  # noqa: F811
    (group,) = answer_groups(regenerated(recorded))
    assert sorted(group.rewards) == [0.0, 0.0, 1.0] and len(group.answers) == 3
    found = measure_agreement(RelativeJudge(scores_cancel(0.9, 0.1)), [group])
    assert (found.pairs, found.rate, found.unparsed) == (2, 1.0, 0)


@pytest.mark.parametrize(
    ("complete", "min_pairs", "why"),
    [
        (scores_cancel(0.1, 0.9), 2, "ordered 0% of 2 recorded pairs"),  # it disagrees
        (scores_cancel(0.9, 0.1), 3, "only 2 recorded pairs"),  # too little to measure
        (lambda _: "the second one, clearly", 2, "1 replies held no scores"),
    ],
)
def test_a_judge_that_does_not_agree_enough_is_refused(recorded, complete, min_pairs, why) -> None:  # noqa: F811
    explicit = ToolCallReward()
    reward, report = judge_reward(
        RelativeJudge(complete),
        regenerated(recorded),
        explicit,
        unreferenced=4,
        min_agreement=0.75,
        min_pairs=min_pairs,
    )
    assert reward is explicit and report["used"] is False
    assert report["reason"].startswith("refused on 4 prompts without a rewarded reference")
    assert why in report["reason"]


def test_an_unreadable_reply_counts_as_disagreement_when_measured() -> None:
    found = agreement([None, [0.9, 0.1]], [[1.0, 0.0, None, 1.0], [1.0, 0.0]])
    # The unread group's two rated pairs with different rewards count, none as concordant.
    assert (found.pairs, found.concordant, found.unparsed) == (3, 1.0, 1)


def test_a_trusted_judge_scores_only_what_has_no_explicit_reward(recorded) -> None:  # noqa: F811
    asked = []

    def complete(prompt: str) -> str:
        asked.append(prompt)
        return scores_cancel(1.0, 0.0)(prompt)

    reward, report = judge_reward(
        RelativeJudge(complete),
        regenerated(recorded),
        ToolCallReward(),
        unreferenced=1,
        min_agreement=0.75,
        min_pairs=2,
    )
    assert report["used"] is True and report["agreement"] == 1.0
    assert report["reason"].startswith("used on 1 prompts")
    cancel, lookup = call_text("cancel_order", WRONG), call_text("lookup_order", WRONG)
    asked.clear()
    # A prompt with a rewarded reference: the verifiable reward alone, the judge not asked.
    referenced = RecordedPrompt(
        event_id="r",
        tenant="acme",
        messages=PROMPT.messages,
        tools=[{"type": "function", "function": {"name": n, "parameters": {}}} for n in NAMES],
        reference={"name": "lookup_order", "arguments": WRONG},
    )
    assert reward.score_group(referenced, [cancel, lookup], [None, None]) == [0.0, 1.0]
    assert asked == []
    # Without one: the judge scores the samples, never the recorded answer's explicit 0.
    assert reward.score_group(PROMPT, [cancel, lookup, cancel], [None, None, 0.0]) == [
        1.0,
        0.0,
        0.0,
    ]
    assert len(asked) == 1


def test_a_judge_that_cannot_answer_abstains_in_training() -> None:
    reward = JudgedReward(ToolCallReward(), RelativeJudge(lambda _: "no idea"))
    # Unscored samples get the group's explicit mean (or 0): the group teaches nothing.
    assert reward.score_group(PROMPT, ["a", "b", "c"], [None, None, 1.0]) == [1.0, 1.0, 1.0]
    assert reward.score_group(PROMPT, ["a", "b"], [None, None]) == [0.0, 0.0]
    assert (reward.judged_groups, reward.abstained) == (2, 2)


def test_with_nothing_to_judge_the_judge_is_not_asked(recorded) -> None:  # noqa: F811
    explicit = ToolCallReward()

    def complete(prompt: str) -> str:
        raise AssertionError("the judge was asked")

    reward, report = judge_reward(
        RelativeJudge(complete),
        regenerated(recorded),
        explicit,
        unreferenced=0,
        min_agreement=0.75,
        min_pairs=1,
    )
    assert reward is explicit and report["used"] is False


def test_grpo_groups_of_an_unreferenced_prompt_take_the_judges_scores(tmp_path) -> None:
    import torch

    from evolution.rl.config import TrainConfig
    from evolution.rl.groups import draw_groups
    from evolution.rl.policy import Policy
    from evoplane.demo.tiny import TinyModelSpec, init_tiny

    policy = Policy.load(init_tiny(tmp_path, TinyModelSpec(seed=0)))
    seen = []

    def complete(prompt: str) -> str:
        count = prompt.count('<answer index="')
        seen.append(count)
        return json.dumps({"scores": [i / (count - 1) for i in range(count)]})

    config = TrainConfig(prompts_per_step=1, group_size=3, max_new_tokens=4)
    reward = JudgedReward(ToolCallReward(), RelativeJudge(complete))
    (group,) = draw_groups(
        policy, [PROMPT], random.Random(0), reward, config, torch.Generator().manual_seed(0)
    )
    assert seen == [3] and group["rewards"] == [0.0, 0.5, 1.0]
    assert group["advantages"][0] < 0 < group["advantages"][2]


def test_a_judge_that_refuses_the_job_is_refused_and_the_job_trains_on(recorded) -> None:  # noqa: F811
    from activities.training import _judged
    from evolution.rl.plan import training_plan
    from evolution.rl.samples import record_prompts
    from evolution.rl.settings import JudgeSettings
    from tests.support.upstream import ScriptedUpstream

    data = regenerated(recorded)
    prompts = [p for r in data for p in record_prompts(r)]
    usable = [p for p in prompts if p.reference is not None]
    plan = training_plan(None, None, data, usable, [])
    explicit = ToolCallReward()
    with ScriptedUpstream(api_key="right") as upstream:  # the job has no key for it: 401
        chosen = JudgeSettings(base_url=upstream.base_url, model="scripted-model")
        unreferenced = [p for p in prompts if p.reference is None]
        kept, reward, report = _judged(plan, chosen, data, explicit, unreferenced)
    assert kept is plan and reward is explicit and report["used"] is False
    assert (
        report["reason"].startswith("refused, it could not be asked: ")
        and "401" in report["reason"]
    )
