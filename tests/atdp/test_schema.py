"""The JSON Schema: checked in, in sync with the models, and accepting what they accept."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import jsonschema
from hypothesis import given, settings

from atdp import Event, Reward, Trajectory
from atdp.schema import SCHEMA_PATH, json_schema, schema_text
from tests import strategies as S

TRAJECTORY = uuid.UUID("01900000-0000-7000-8000-000000000002")


def test_checked_in_schema_matches_the_models() -> None:
    assert SCHEMA_PATH.read_text() == schema_text(), (
        "atdp/schema/atdp.schema.json is out of date: regenerate it with "
        "`evoplane atdp schema > atdp/schema/atdp.schema.json` and review the diff"
    )


def test_cli_prints_the_checked_in_schema() -> None:
    evoplane = Path(sys.executable).parent / "evoplane"
    result = subprocess.run(
        [str(evoplane), "atdp", "schema"], capture_output=True, text=True, check=True
    )
    assert result.stdout == SCHEMA_PATH.read_text()


def _validator(definition: str) -> jsonschema.Draft202012Validator:
    schema = json_schema()
    return jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{definition}"})


EVENT_SCHEMA = _validator("Event")


@settings(max_examples=60)
@given(S.events(TRAJECTORY, "acme"))
def test_schema_accepts_every_valid_event(event: Event) -> None:
    EVENT_SCHEMA.validate(json.loads(event.model_dump_json()))


@settings(max_examples=30)
@given(S.trajectories("acme", "bot"), S.rewards("acme", TRAJECTORY))
def test_schema_accepts_valid_trajectories_and_rewards(
    trajectory: Trajectory, reward: Reward
) -> None:
    _validator("Trajectory").validate(json.loads(trajectory.model_dump_json()))
    _validator("Reward").validate(json.loads(reward.model_dump_json()))


def test_schema_rejects_an_unknown_event_kind() -> None:
    errors = list(EVENT_SCHEMA.iter_errors({"kind": "telepathy"}))
    assert any(list(error.path) == ["kind"] for error in errors)
