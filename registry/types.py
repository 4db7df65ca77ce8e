"""Column types that behave the same on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect

__all__ = ["JSONDocument", "UTCDateTime"]

# JSONB on PostgreSQL (indexable, compact); JSON text on SQLite.
JSONDocument = sa.JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(sa.TypeDecorator[datetime]):
    """Timezone-aware datetimes, stored in UTC on every backend.

    SQLite has no time zones: without this, an aware datetime goes in and a naive one
    comes out, and comparisons across backends silently differ.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
