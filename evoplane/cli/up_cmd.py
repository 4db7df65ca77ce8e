"""`evoplane up`: the embedded stack on this machine."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from evoplane.settings import load_settings


def up(
    check: bool = typer.Option(
        False, "--check", help="Report the health of each service and exit."
    ),
    data_dir: Path | None = typer.Option(None, help="Data directory [env: EVOPLANE_DATA_DIR]."),
    temporal_port: int | None = typer.Option(
        None, help="Temporal gRPC port [env: EVOPLANE_TEMPORAL_PORT]."
    ),
    temporal_ui_port: int | None = typer.Option(
        None, help="Temporal Web UI port [env: EVOPLANE_TEMPORAL_UI_PORT]."
    ),
    mlflow_port: int | None = typer.Option(None, help="MLflow port [env: EVOPLANE_MLFLOW_PORT]."),
    gateway_port: int | None = typer.Option(
        None, help="Gateway port [env: EVOPLANE_GATEWAY_PORT, default 8400]."
    ),
) -> None:
    """Run the embedded stack (Temporal, MLflow, gateway) in the foreground; Ctrl-C stops it."""
    from evoplane.stack.launcher import check_stack, run_stack

    settings = load_settings(
        data_dir=data_dir,
        temporal_port=temporal_port,
        temporal_ui_port=temporal_ui_port,
        mlflow_port=mlflow_port,
        gateway_port=gateway_port,
    )
    if not check:
        raise typer.Exit(run_stack(settings))
    reports = check_stack(settings)
    table = Table("service", "address", "health", "detail")
    for report in reports:
        mark = "[green]healthy[/green]" if report.healthy else "[red]down[/red]"
        table.add_row(report.name, report.address, mark, report.detail)
    Console().print(table)
    raise typer.Exit(0 if all(report.healthy for report in reports) else 1)
