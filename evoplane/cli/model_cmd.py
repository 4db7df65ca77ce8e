"""`evoplane model ...`: local models for the `local` engine, tests and the demo."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

console = Console(soft_wrap=True, stderr=True)
app = typer.Typer(help="Local models: build the tiny test model.", no_args_is_help=True)


@app.command("init-tiny")
def init_tiny(
    directory: Path = typer.Argument(..., help="Where to write the model (created if missing)."),
    seed: int = typer.Option(0, help="Initialisation seed: the same seed gives the same weights."),
    force: bool = typer.Option(False, help="Overwrite a model already in DIRECTORY."),
) -> None:
    """Build a tiny Qwen2 (0.56M parameters) with a byte-level tokenizer; no downloads."""
    try:
        from evoplane.demo.tiny import TinyModelSpec
        from evoplane.demo.tiny import init_tiny as build
    except ImportError as error:  # pragma: no cover - depends on the install
        raise typer.BadParameter(
            f"{error.name} is missing: install the train extra (make install)"
        ) from error
    if (directory / "config.json").exists() and not force:
        raise typer.BadParameter(
            f"{directory} already holds a model; pass --force to overwrite it",
            param_hint="DIRECTORY",
        )
    build(directory, TinyModelSpec(seed=seed))
    console.print(f"tiny model written to [bold]{directory}[/bold] (seed {seed})")
