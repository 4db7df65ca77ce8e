"""Alembic environment for the registry.

Run through `evoplane db upgrade` (see registry/migrate.py), which passes an open
connection in `config.attributes["connection"]`; the URL path is for plain `alembic`.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from registry.migrate import VERSION_TABLE
from registry.partitions import compared_by_autogenerate
from registry.tables import metadata

config = context.config


def _configure(connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_name=compared_by_autogenerate,
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported; run `evoplane db upgrade`")
run_migrations_online()
