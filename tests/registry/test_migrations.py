"""Migrations create exactly the schema the tables declare, and a stale schema is refused."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from registry import (
    SchemaOutOfDateError,
    check_schema,
    create_db_engine,
    current_revision,
    head_revision,
    upgrade,
)
from registry.migrate import VERSION_TABLE
from registry.partitions import compared_by_autogenerate
from registry.tables import metadata


def test_migrations_match_the_table_definitions(engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "version_table": VERSION_TABLE,
                "include_name": compared_by_autogenerate,
            },
        )
        diff = compare_metadata(context, metadata)
    assert diff == [], f"tables and migrations disagree; add a migration: {diff}"


def test_upgrade_is_idempotent(engine) -> None:
    assert current_revision(engine) == head_revision()
    assert upgrade(engine) == head_revision()
    check_schema(engine)


def test_empty_database_is_refused_with_the_fix(database_url) -> None:
    engine = create_db_engine(database_url)
    with pytest.raises(SchemaOutOfDateError, match="run `evoplane db upgrade`"):
        check_schema(engine)


def test_old_schema_is_refused_with_the_fix(engine) -> None:
    with engine.begin() as connection:
        connection.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '0000'"))
    with pytest.raises(SchemaOutOfDateError, match="does not know"):
        check_schema(engine)


def test_downgrade_removes_everything(engine) -> None:
    from alembic import command

    from registry.migrate import _config

    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "base")
    remaining = set(sa.inspect(engine).get_table_names()) - {VERSION_TABLE}
    assert remaining == set()
    upgrade(engine)
    assert set(metadata.tables) <= set(sa.inspect(engine).get_table_names())
