"""The relative judge: its replies parsed strictly, its agreement with explicit rewards
counted pair by pair, and never a replacement for an explicit reward."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evolution.rl.data import RelativeJudge, agreement, with_explicit
from evolution.rl.data.judge import parse_scores
from evolution.rl.samples import RecordedPrompt

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
