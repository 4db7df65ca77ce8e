"""What a chat-completion request must look like before anything is sent or stored.

Only the fields the gateway relies on are checked; everything else passes through to the
upstream untouched (`extra="allow"`), so new OpenAI parameters keep working.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["ChatCompletionRequest", "describe_validation_error"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class FunctionDefinition(_Open):
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None

    @field_validator("parameters")
    @classmethod
    def _is_json_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return value
        problem = _schema_problem(value)
        if problem:
            raise ValueError(f"not a valid JSON Schema: {problem}")
        if value.get("type", "object") != "object":
            raise ValueError("function parameters must be a JSON Schema of type 'object'")
        return value


def _schema_problem(schema: dict[str, Any]) -> str | None:
    """What makes `schema` an invalid JSON Schema, or None.

    An agent sends the same tool schemas on every call, and checking one against the
    metaschema costs about a millisecond of CPU: verdicts are kept by the schema's text.
    """
    try:
        text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not plain JSON (an integer beyond 64 bits): check it uncached
        return _check(schema)
    return _schema_text_problem(text)


@lru_cache(maxsize=4096)
def _schema_text_problem(text: bytes) -> str | None:
    return _check(orjson.loads(text))


def _check(schema: dict[str, Any]) -> str | None:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return error.message
    return None


class Tool(_Open):
    type: Literal["function"]
    function: FunctionDefinition


class Message(_Open):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_call_id: str | None = None


class ChatCompletionRequest(_Open):
    model: str = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    tools: list[Tool] | None = None
    stream: bool = False
    n: int | None = Field(default=None, ge=1, le=16)
    temperature: float | None = Field(default=None, ge=0, le=2)
    user: str | None = None
    metadata: dict[str, Any] | None = None


def describe_validation_error(error: ValidationError) -> tuple[str, str]:
    """The first problem as (message, param): `messages.0.role: Input should be ...`."""
    first = error.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    message = first["msg"].removeprefix("Value error, ")
    return (f"{param}: {message}" if param else message), (param or "")
