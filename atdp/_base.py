"""Shared building blocks of the ATDP models: the base model, JSON values, ids, time."""

from __future__ import annotations

import os
import time
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints
from pydantic import JsonValue as _PydanticJsonValue

ATDP_VERSION = "1.0"

__all__ = [
    "ATDP_VERSION",
    "ATDPModel",
    "JsonObject",
    "JsonValue",
    "Name",
    "Text",
    "new_id",
    "utcnow",
]


def _reject_nul(value: Any, path: str = "") -> Any:
    """Refuse NUL code points anywhere in a JSON value.

    PostgreSQL text and JSONB cannot hold U+0000, so a value that carries one
    could be accepted by the gateway and then fail to persist. Refusing it at the
    protocol boundary keeps "valid event" and "storable event" the same thing.
    """
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(f"NUL character (U+0000) in string{' at ' + path if path else ''}")
    elif isinstance(value, dict):
        for key, item in value.items():
            _reject_nul(key, path)
            _reject_nul(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _reject_nul(item, f"{path}[{index}]")
    return value


JsonValue: TypeAlias = Annotated[_PydanticJsonValue, AfterValidator(_reject_nul)]
JsonObject: TypeAlias = Annotated[dict[str, _PydanticJsonValue], AfterValidator(_reject_nul)]

# Free text: any length, no NUL (see _reject_nul).
Text: TypeAlias = Annotated[str, AfterValidator(_reject_nul)]
# Identifiers people choose (tenant, agent, tool names): short, printable, non-empty.
Name: TypeAlias = Annotated[
    str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")
]


class ATDPModel(BaseModel):
    """Base of every ATDP model: strict about unknown fields and non-finite numbers."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        frozen=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


def new_id() -> uuid.UUID:
    """A time-ordered UUID (version 7, RFC 9562): sortable by creation, unique without a DB.

    Ids are made where data is born (the gateway), so writing the same event twice
    is recognisably the same write.
    """
    unix_ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (unix_ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76  # version
    value |= ((rand >> 62) & 0xFFF) << 64  # rand_a, 12 bits
    value |= 0b10 << 62  # variant
    value |= rand & ((1 << 62) - 1)  # rand_b, 62 bits
    return uuid.UUID(int=value)


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)
