"""Schema migrations: apply them, and refuse to run against a schema that is behind."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

__all__ = [
    "VERSION_TABLE",
    "SchemaOutOfDateError",
    "check_schema",
    "current_revision",
    "head_revision",
    "upgrade",
]

VERSION_TABLE = "evoplane_alembic_version"
_MIGRATIONS = Path(__file__).parent / "migrations"


class SchemaOutOfDateError(RuntimeError):
    """The database schema is not the one this code expects."""


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    return config


def head_revision() -> str:
    """The newest migration this code ships."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None, "no migrations found"
    return head


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at, or None for an empty database."""
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> str:
    """Apply migrations up to `revision`; idempotent. Returns the revision reached."""
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
    return current_revision(engine) or ""


def check_schema(engine: Engine) -> None:
    """Raise SchemaOutOfDateError unless the database is at this code's head revision."""
    current, head = current_revision(engine), head_revision()
    if current == head:
        return
    where = engine.url.render_as_string(hide_password=True)
    if current is None:
        raise SchemaOutOfDateError(
            f"the registry database at {where} has no Evoplane schema yet; "
            "run `evoplane db upgrade` to create it"
        )
    known = {rev.revision for rev in ScriptDirectory.from_config(_config()).walk_revisions()}
    if current not in known:
        raise SchemaOutOfDateError(
            f"the registry database at {where} is at revision {current}, which this version "
            f"of Evoplane does not know (newest known: {head}); upgrade Evoplane"
        )
    raise SchemaOutOfDateError(
        f"the registry database at {where} is at revision {current} but this code expects "
        f"{head}; run `evoplane db upgrade`"
    )
