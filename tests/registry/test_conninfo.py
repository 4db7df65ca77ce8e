"""`libpq_conninfo`: the registry's URL as the libpq connection string that the gateway's
own psycopg connections (session routes, change notifications) open."""

from __future__ import annotations

import psycopg
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from registry.db import libpq_conninfo
from tests.conftest import postgres_schema_url

# What libpq options and passwords may hold, spaces, "+", "=" and quotes included.
_text = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="\\") | st.just(" "),
    min_size=1,
    max_size=30,
)


@given(options=_text, password=_text, database=_text)
def test_every_part_reaches_libpq_as_written(options, password, database) -> None:
    url = sa.URL.create(
        "postgresql+psycopg",
        username="ana",
        password=password,
        host="db.internal",
        port=6432,
        database=database,
        query={"options": options, "sslmode": "prefer"},
    )
    engine = sa.create_engine(url)
    parsed = psycopg.conninfo.conninfo_to_dict(libpq_conninfo(engine))
    assert parsed == {
        "host": "db.internal",
        "port": "6432",
        "dbname": database,
        "user": "ana",
        "password": password,
        "options": options,
        "sslmode": "prefer",
    }


def test_several_server_settings_in_options_all_apply(postgres_admin) -> None:
    """The tests' own URLs carry two settings; a connection opened from the conninfo has
    both (a rendered URL once turned the space between them into a "+")."""
    engine = sa.create_engine(postgres_schema_url("some_schema"))
    with psycopg.connect(libpq_conninfo(engine)) as connection:
        assert connection.execute("SHOW search_path").fetchone()[0] == "some_schema"
        assert connection.execute("SHOW synchronous_commit").fetchone()[0] == "off"


def test_sqlite_has_none() -> None:
    assert libpq_conninfo(sa.create_engine("sqlite://")) is None
