"""`evoplane db`: the registry database schema."""

from __future__ import annotations

import typer
from rich.console import Console

from evoplane.settings import load_settings

app = typer.Typer(
    help="Registry database: apply migrations, show the schema revision.", no_args_is_help=True
)


@app.command("upgrade")
def upgrade_command(
    revision: str = typer.Argument("head", help="Target revision."),
) -> None:
    """Apply the registry's migrations (idempotent)."""
    from registry import create_db_engine, current_revision, describe_url, upgrade

    engine = create_db_engine(load_settings().registry_url)
    before = current_revision(engine)
    after = upgrade(engine, revision)
    where = describe_url(engine.url)
    if before == after:
        Console().print(f"{where} is already at revision {after}.", highlight=False, soft_wrap=True)
    else:
        Console().print(f"{where}: {before or 'empty'} -> {after}", highlight=False, soft_wrap=True)


@app.command("current")
def current_command() -> None:
    """Show the database's schema revision and the one this code expects."""
    from registry import create_db_engine, current_revision, describe_url, head_revision

    engine = create_db_engine(load_settings().registry_url)
    current, head = current_revision(engine), head_revision()
    state = "up to date" if current == head else "run `evoplane db upgrade`"
    Console().print(
        f"{describe_url(engine.url)}: at {current or 'empty'}, code expects {head} ({state})",
        highlight=False,
        soft_wrap=True,
    )
