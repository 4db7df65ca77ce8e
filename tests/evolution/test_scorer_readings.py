"""Reading what code scorers answer, and their settings: anything is a score or a clear error."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from evolution.scorers import ScoreReading, ScorerOutputError, ScorerSpec, read_batch, read_score
from evolution.settings import EvolutionSettings

JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@given(st.floats(min_value=0.0, max_value=1.0), st.none() | st.text(max_size=50))
def test_a_number_from_0_to_1_is_a_score(value, critique) -> None:
    assert read_score(value) == ScoreReading(value, None)
    assert read_score({"value": value, "critique": critique}) == ScoreReading(
        value, critique or None
    )


@given(JSON)
def test_anything_else_is_a_clear_error_never_a_crash(raw) -> None:
    try:
        reading = read_score(raw)
    except ScorerOutputError as error:
        assert "a scorer returns" in str(error) or "critique" in str(error)
    else:
        assert reading.value is None or (
            0.0 <= reading.value <= 1.0 and math.isfinite(reading.value)
        )


def test_bools_and_abstentions() -> None:
    assert read_score(True).value == 1.0 and read_score(False).value == 0.0
    assert read_score(None).value is None and read_score({"value": None}).value is None
    with pytest.raises(ScorerOutputError, match="outside 0 to 1"):
        read_score(7)


@given(st.lists(st.uuids().map(str), unique=True, min_size=1, max_size=5), JSON)
def test_a_batch_answer_covers_every_trajectory_sent(ids, extra) -> None:
    body = {"results": [{"trajectory_id": ids[0], "value": 0.5}, extra]}
    read = read_batch(body, ids)
    assert set(read) == set(ids) and read[ids[0]] == ScoreReading(0.5)
    assert all(isinstance(read[i], str) for i in ids[1:])


def test_a_batch_answer_of_the_wrong_shape_says_the_right_one() -> None:
    with pytest.raises(ScorerOutputError, match=r"answers \{'results'"):
        read_batch([0.5], ["a"])


def test_settings_name_one_way_to_call_each_scorer() -> None:
    with pytest.raises(ValidationError, match="exactly one of them"):
        ScorerSpec(name="x")
    with pytest.raises(ValidationError, match="exactly one of them"):
        ScorerSpec(name="x", url="http://a", entry_point="a:b")
    with pytest.raises(ValidationError, match="not an entry point"):
        ScorerSpec(name="x", entry_point="a.b")
    with pytest.raises(ValidationError, match="not an http"):
        ScorerSpec(name="x", url="ftp://a")
    with pytest.raises(ValidationError, match="given twice: \\['x'\\]"):
        EvolutionSettings.of({"scorers": [{"name": "x", "url": "http://a"}] * 2})
    assert ScorerSpec(name="x", url="http://a", reward="task_success").reward_name == "task_success"
