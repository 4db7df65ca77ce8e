"""The one way to reach the registry database: an engine factory and a transaction scope."""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa
from psycopg.conninfo import make_conninfo
from sqlalchemy.engine import Engine
from sqlmodel import Session

__all__ = [
    "DatabaseURLError",
    "DatabaseUnavailableError",
    "Session",
    "create_db_engine",
    "describe_url",
    "dumps_json",
    "id_chunks",
    "is_unreachable",
    "libpq_conninfo",
    "transaction",
]


class DatabaseUnavailableError(RuntimeError):
    """The registry database cannot be reached."""


class DatabaseURLError(ValueError):
    """The database URL names a backend or driver Evoplane does not support."""


# Integral floats of 1e16 and more are written in exponent form ("2.7e+16"). PostgreSQL's
# JSONB keeps the number but prints it back as an integer, which Python then reads as an
# int of a different value than the float. Such floats are written as exact digits with
# ".0", which JSONB preserves. The placeholder holds NUL, which ATDP text can never hold.
_BIG = 1e16
_MARK = "\x00f{}\x00"


def dumps_json(value: object) -> str:
    """Compact JSON, non-ASCII kept as is, with floats that survive JSONB unchanged."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if not may_hold_big_floats(text):  # the common, fast case
        return text
    big_floats: list[float] = []
    prepared = _mark_big_floats(value, big_floats)
    text = json.dumps(prepared, separators=(",", ":"), ensure_ascii=False)
    for index, number in enumerate(big_floats):
        text = text.replace(json.dumps(_MARK.format(index)), f"{int(number)}.0", 1)
    return text


def may_hold_big_floats(text: str) -> bool:
    """Whether JSON text may hold a float JSONB would change (exponent form, e.g. 2.7e+16)."""
    return "e+" in text


def _mark_big_floats(value: object, found: list[float]) -> object:
    if isinstance(value, float) and abs(value) >= _BIG and value.is_integer():
        found.append(value)
        return _MARK.format(len(found) - 1)
    if isinstance(value, dict):
        return {key: _mark_big_floats(item, found) for key, item in value.items()}
    if isinstance(value, list):
        return [_mark_big_floats(item, found) for item in value]
    return value


def describe_url(url: str | sa.URL) -> str:
    return sa.make_url(url).render_as_string(hide_password=True)


def libpq_conninfo(engine: Engine) -> str | None:
    """The engine's PostgreSQL database as a libpq URL, for a psycopg connection of one's
    own outside SQLAlchemy's pool; None for SQLite."""
    url = engine.url
    if url.get_backend_name() != "postgresql":
        return None
    # Built from the parts, not by rendering the URL: a rendered query writes a space as
    # "+", which libpq does not read back as one, so `options=-c a=1 -c b=2` broke.
    parts = {
        "host": url.host,
        "port": url.port,
        "dbname": url.database,
        "user": url.username,
        "password": url.password,
    }
    for name, value in url.query.items():  # a repeated parameter: its last value, as libpq
        parts[name] = value[-1] if isinstance(value, tuple) else value
    return make_conninfo("", **{name: value for name, value in parts.items() if value is not None})


def create_db_engine(url: str | sa.URL, *, check: bool = True, **kwargs: object) -> Engine:
    """Create the engine for `url` (SQLite file or `postgresql+psycopg://`).

    With `check`, connect once so a wrong URL fails here with a message that says what
    to do, not deep inside the first request.
    """
    url = sa.make_url(url)
    options: dict[str, object] = {"json_serializer": dumps_json, "pool_pre_ping": True}
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        options["connect_args"] = {"timeout": 30}
    elif url.get_backend_name() == "postgresql" and url.get_driver_name() != "psycopg":
        raise DatabaseURLError(
            f"{describe_url(url)}: Evoplane talks to PostgreSQL through psycopg 3; "
            "write the URL as postgresql+psycopg://user@host:5432/db"
        )
    elif url.get_backend_name() not in {"sqlite", "postgresql"}:
        raise DatabaseURLError(
            f"{describe_url(url)}: the registry runs on PostgreSQL or SQLite; "
            "use postgresql+psycopg://... or unset EVOPLANE_DATABASE_URL"
        )
    options.update(kwargs)
    engine = sa.create_engine(url, **options)
    if url.get_backend_name() == "sqlite":
        sa.event.listen(engine, "connect", _sqlite_pragmas)
    if check:
        _check_reachable(engine)
    return engine


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    # Foreign keys are off by default in SQLite; WAL lets readers run beside the writer.
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _check_reachable(engine: Engine) -> None:
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    except sa.exc.OperationalError as error:
        where = describe_url(engine.url)
        hint = (
            "start it, or unset EVOPLANE_DATABASE_URL to use the embedded SQLite store"
            if engine.url.get_backend_name() == "postgresql"
            else "check that the data directory is writable"
        )
        raise DatabaseUnavailableError(
            f"the registry database at {where} refused the connection; {hint} "
            f"({str(error.orig).strip().splitlines()[0]})"
        ) from error


@contextmanager
def transaction(engine: Engine) -> Iterator[Session]:
    """A session whose work commits together at the end of the block, or not at all."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def is_unreachable(error: BaseException) -> bool:
    """True for a failure to reach the database (worth retrying), not for a refused write."""
    return isinstance(
        error, sa.exc.OperationalError | sa.exc.InterfaceError | DatabaseUnavailableError
    ) or (isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated)


def id_chunks(ids: Collection, size: int = 10_000) -> Iterator[list]:
    """`ids` in lists of at most `size`, for `IN (...)`: a statement binds each id as a
    parameter, and a database takes only so many (PostgreSQL 65,535; SQLite 32,766)."""
    listed = list(ids)
    for start in range(0, len(listed), size):
        yield listed[start : start + size]
