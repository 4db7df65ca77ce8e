"""ATDP models: valid records round-trip through JSON, invalid ones fail naming the field."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from atdp import (
    Event,
    EventMetadata,
    Harness,
    MessageAction,
    ModelRef,
    ReplayInfo,
    Reward,
    ScalarValue,
    Trajectory,
    VersionSpec,
    new_id,
    utcnow,
)
from tests import strategies as S

TRAJECTORY = uuid.UUID("01900000-0000-7000-8000-000000000001")


def minimal_event(**changes) -> dict:
    body = {
        "id": str(new_id()),
        "trajectory_id": str(TRAJECTORY),
        "seq": 0,
        "kind": "llm_call",
        "created_at": "2026-11-30T10:00:00Z",
        "metadata": {"tenant": "acme", "session": "s-1"},
        "replay": {"class": "deterministic"},
    }
    body.update(changes)
    return body


def error_locations(error: ValidationError) -> set[str]:
    return {".".join(str(part) for part in item["loc"]) for item in error.errors()}


@given(S.events(TRAJECTORY, "acme"))
def test_any_valid_event_survives_json(event: Event) -> None:
    assert Event.model_validate_json(event.model_dump_json()) == event
    assert Event.model_validate(json.loads(event.model_dump_json())) == event


@given(S.trajectories("acme", "support-bot"))
def test_any_valid_trajectory_survives_json(trajectory: Trajectory) -> None:
    assert Trajectory.model_validate_json(trajectory.model_dump_json()) == trajectory


@given(S.rewards("acme", TRAJECTORY))
def test_any_valid_reward_survives_json(reward: Reward) -> None:
    assert Reward.model_validate_json(reward.model_dump_json()) == reward


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": "telepathy"}, "kind"),
        ({"seq": -1}, "seq"),
        ({"id": "not-a-uuid"}, "id"),
        ({"created_at": "2026-11-30T10:00:00"}, "created_at"),  # naive: no time zone
        ({"metadata": {"tenant": "acme"}}, "metadata.session"),
        ({"metadata": {"tenant": "", "session": "s"}}, "metadata.tenant"),
        ({"metadata": {"tenant": "acme", "session": "s", "latency_ms": -3}}, "metadata.latency_ms"),
        ({"replay": {"class": "approximate"}}, "replay"),
        ({"replay": {"class": "sometimes"}}, "replay.class"),
        ({"governance": {"training": "always"}}, "governance.training"),
        ({"hidden": {"plan": "x" * 4001}}, "hidden.plan"),
        (
            {"action": {"type": "message", "token_ids": [1, 2], "logprobs": [-0.1]}},
            "action.message",
        ),
        (
            {"action": {"type": "message", "token_ids": [1], "logprobs": [0.5]}},
            "action.message.logprobs.0",
        ),
        ({"action": {"type": "teleport"}}, "action"),
        ({"observation": {"content": "a\x00b"}}, "observation.content"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_invalid_event_is_rejected_naming_the_field(changes: dict, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        Event.model_validate(minimal_event(**changes))
    assert field in error_locations(caught.value), caught.value


def test_replay_reason_is_required_unless_deterministic() -> None:
    with pytest.raises(ValidationError, match="reason is required"):
        ReplayInfo.model_validate({"class": "non_replayable"})
    info = ReplayInfo.model_validate({"class": "non_replayable", "reason": "sent an email"})
    assert info.model_dump()["class"] == "non_replayable"


def test_logprobs_must_align_with_tokens() -> None:
    with pytest.raises(ValidationError, match="one per token"):
        MessageAction(token_ids=[1, 2, 3], logprobs=[-0.1, -0.2])
    with pytest.raises(ValidationError, match="without token_ids"):
        MessageAction(logprobs=[-0.1])
    assert MessageAction(token_ids=[1, 2], logprobs=[-0.1, -2.0]).logprobs == [-0.1, -2.0]


def test_event_cannot_be_its_own_parent() -> None:
    event_id = str(new_id())
    with pytest.raises(ValidationError, match="cannot cause itself"):
        Event.model_validate(minimal_event(id=event_id, parent_id=event_id))


def test_nul_is_refused_deep_inside_json() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        EventMetadata(tenant="acme", session="s", extra={"a": [{"b": "x\x00"}]})


def test_trajectory_cannot_end_before_it_starts() -> None:
    with pytest.raises(ValidationError, match="before started_at"):
        Trajectory(
            id=new_id(),
            tenant="a",
            agent="b",
            session="c",
            started_at="2026-01-02T00:00:00Z",
            ended_at="2026-01-01T00:00:00Z",
        )


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_reward_is_rejected(bad: float) -> None:
    with pytest.raises(ValidationError):
        ScalarValue(value=bad)


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda c: not 0.0 <= c <= 1.0))
def test_confidence_outside_unit_interval_is_rejected(confidence: float) -> None:
    with pytest.raises(ValidationError) as caught:
        Reward(
            id=new_id(),
            tenant="a",
            trajectory_id=TRAJECTORY,
            value=ScalarValue(value=1.0),
            source="judge",
            confidence=confidence,
            created_at=utcnow(),
        )
    assert "confidence" in error_locations(caught.value)


def test_new_ids_are_time_ordered_uuid7() -> None:
    ids = [new_id() for _ in range(200)]
    assert all(i.version == 7 for i in ids)
    assert len(set(ids)) == len(ids)
    # Sorted by their 48-bit millisecond prefix: creation order survives sorting.
    prefixes = [i.int >> 80 for i in ids]
    assert prefixes == sorted(prefixes)


def test_version_content_hash_depends_on_content_only() -> None:
    a = VersionSpec(
        model=ModelRef(engine="openai", model="m"), harness=Harness(instructions="Be brief.")
    )
    b = VersionSpec.model_validate_json(a.model_dump_json())
    c = a.model_copy(update={"harness": Harness(instructions="Be thorough.")})
    assert a.content_hash() == b.content_hash()
    assert a.content_hash() != c.content_hash()
    assert a.part_hashes()["model"] == c.part_hashes()["model"]
    assert a.part_hashes()["harness"] != c.part_hashes()["harness"]


def test_a_copy_of_a_hashed_version_hashes_its_own_content() -> None:
    """Hashes are cached on the frozen spec; a copy with changes must not inherit them (it
    would register as its parent and report the parent's fingerprints)."""
    a = VersionSpec(model=ModelRef(engine="openai", model="m"))
    hashed = a.content_hash(), a.part_hashes()
    c = a.model_copy(update={"harness": Harness(instructions="Be thorough.")})
    fresh = VersionSpec.model_validate_json(c.model_dump_json())
    assert c.content_hash() == fresh.content_hash() != hashed[0]
    assert c.part_hashes() == fresh.part_hashes() != hashed[1]
    assert a.model_copy().content_hash() == hashed[0]


@pytest.mark.parametrize("value", [1e13, -2e12, 1e300])
def test_reward_values_are_bounded_so_means_stay_finite(value: float) -> None:
    with pytest.raises(ValidationError) as caught:
        ScalarValue(value=value)
    assert "value" in error_locations(caught.value)


def test_cost_follows_the_routes_prices() -> None:
    route = ModelRef(engine="openai", prompt_price=0.5, completion_price=2.0)
    assert route.cost_usd(1_000_000, 500_000) == 1.5
    assert ModelRef(engine="openai").cost_usd(10, 10) is None
