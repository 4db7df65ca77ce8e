"""The held-out split of a training job's prompts: stable, and never empty when it can hold one."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from evolution.rl.samples import RecordedPrompt, split_holdout


def prompts(ids: list[uuid.UUID]) -> list[RecordedPrompt]:
    return [RecordedPrompt(event_id=str(i), tenant="acme", messages=[]) for i in ids]


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.uuids(), min_size=2, max_size=40, unique=True),
    fraction=st.floats(min_value=0.01, max_value=0.9),
    seed=st.integers(0, 5),
)
def test_a_split_partitions_holds_one_out_and_is_stable(ids, fraction, seed) -> None:
    train, held = split_holdout(prompts(ids), fraction, seed=seed)
    assert sorted(p.event_id for p in train + held) == sorted(str(i) for i in ids)
    assert held, "a job with two prompts or more always has a held-out reward"
    again_train, again_held = split_holdout(list(reversed(prompts(ids))), fraction, seed=seed)
    assert {p.event_id for p in again_held} == {p.event_id for p in held}


def test_no_fraction_holds_nothing_out() -> None:
    train, held = split_holdout(prompts([uuid.uuid4() for _ in range(5)]), 0.0)
    assert len(train) == 5 and held == []
