"""The `evoplane` command line: one sub-command per part of the product."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from evoplane.cli import (
    admin_cmd,
    atdp_cmd,
    bench_cmd,
    control_cmd,
    data_cmd,
    db_cmd,
    demo_cmd,
    gateway_cmd,
    mcp_cmd,
    model_cmd,
    review_cmd,
    up_cmd,
    worker_cmd,
)
from evoplane.control.client import ControlAPIError
from evoplane.settings import SettingsError
from evoplane.stack.launcher import StackError
from evoplane.stack.process import PortInUseError
from registry import DatabaseUnavailableError, DatabaseURLError, RegistryError, SchemaOutOfDateError

__all__ = ["app", "main"]

app = typer.Typer(
    name="evoplane",
    help="Evoplane: make deployed LLM agents improve from their own traffic, safely.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
app.add_typer(atdp_cmd.app, name="atdp")
app.add_typer(db_cmd.app, name="db")
app.add_typer(model_cmd.app, name="model")
app.command("up")(up_cmd.up)
app.command("gateway")(gateway_cmd.gateway)
app.command("worker")(worker_cmd.worker)
app.command("api")(control_cmd.api)
app.command("demo")(demo_cmd.demo)
for _command in (
    control_cmd.evolve,
    control_cmd.status,
    control_cmd.approve,
    control_cmd.reject,
    control_cmd.abort,
    control_cmd.rollback,
    control_cmd.end_holdback,
    control_cmd.schedule,
):
    app.command(_command.__name__.replace("_", "-"))(_command)
app.add_typer(control_cmd.versions_app, name="versions")
app.add_typer(review_cmd.app, name="review")
app.add_typer(review_cmd.evalset_app, name="evalset")
app.command("score")(review_cmd.score)
app.command("scorers")(review_cmd.scorers)
app.add_typer(bench_cmd.app, name="bench")
app.add_typer(admin_cmd.tenant_app, name="tenant")
app.add_typer(admin_cmd.key_app, name="key")
app.add_typer(admin_cmd.agent_app, name="agent")
app.add_typer(mcp_cmd.app, name="mcp")
app.command("mcp-bridge")(mcp_cmd.mcp_bridge)
app.command("export")(data_cmd.export)
app.command("gc")(data_cmd.gc)

# Errors a user can fix: shown as one clear message, without a traceback.
USER_ERRORS = (
    DatabaseUnavailableError,
    DatabaseURLError,
    SchemaOutOfDateError,
    RegistryError,
    PortInUseError,
    StackError,
    SettingsError,
    FileNotFoundError,
    ControlAPIError,
)


def main() -> None:
    try:
        app()
    except USER_ERRORS as error:
        Console(stderr=True).print(
            f"[bold red]error:[/bold red] {error}", highlight=False, soft_wrap=True
        )
        sys.exit(1)
