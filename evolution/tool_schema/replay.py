"""Tool-call replay: how a schema, with its argument map, judges a tool's recorded calls.

Each call's arguments are validated (JSON Schema 2020-12, formats checked) as the model
would have had to write them, so a candidate is compared with the schema the model was
offered on the same calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import jsonschema

from evolution.operators import OperatorError
from evolution.tool_schema.calls import RecordedCall

__all__ = ["Replay", "replay_calls", "validator"]


@dataclass(frozen=True)
class Replay:
    """How a schema (with its argument map) judges the recorded calls."""

    successes_valid: int
    failures_rejected: int
    accepted_successes: frozenset[int]
    rejected_failures: frozenset[int]


def validator(schema: dict) -> jsonschema.protocols.Validator:
    """A 2020-12 validator that checks formats; OperatorError when the schema is invalid."""
    cls = jsonschema.Draft202012Validator
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise OperatorError(f"the tool schema is not valid JSON Schema: {error.message}") from error
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def replay_calls(
    schema: dict,
    argument_map: dict[str, str],
    successes: list[RecordedCall],
    failures: list[RecordedCall],
) -> Replay:
    """Validate each call's arguments as the model would have had to write them."""
    check = validator(schema)
    to_model = {agent: model for model, agent in argument_map.items()}

    def valid(call: RecordedCall) -> bool:
        if call.arguments is None:
            return False
        renamed = {to_model.get(key, key): value for key, value in call.arguments.items()}
        return check.is_valid(renamed)

    accepted = frozenset(i for i, call in enumerate(successes) if valid(call))
    rejected = frozenset(i for i, call in enumerate(failures) if not valid(call))
    return Replay(len(accepted), len(rejected), accepted, rejected)
