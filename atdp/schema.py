"""JSON Schema export of the ATDP protocol (`evoplane atdp schema`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic.json_schema import models_json_schema

from atdp._base import ATDP_VERSION
from atdp.event import Event
from atdp.reward import Reward
from atdp.trajectory import Trajectory
from atdp.version import VersionSpec

__all__ = ["SCHEMA_PATH", "json_schema", "schema_text"]

SCHEMA_PATH = Path(__file__).parent / "schema" / "atdp.schema.json"

_TOP_LEVEL = (Trajectory, Event, Reward, VersionSpec)


def json_schema() -> dict[str, Any]:
    """One JSON Schema document with a definition per ATDP model."""
    _, schema = models_json_schema(
        [(model, "validation") for model in _TOP_LEVEL],
        title=f"ATDP {ATDP_VERSION}",
        description=(
            "Agentic Trajectory Data Protocol: trajectories, events <o,h,a,y,m>, "
            "late-bound rewards, and the agent version contract."
        ),
    )
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://evoplane.dev/schema/atdp-{ATDP_VERSION}.json"
    return schema


def schema_text() -> str:
    """The schema as the checked-in file holds it: sorted keys, two-space indent."""
    return json.dumps(json_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
