"""`evoplane atdp`: the trajectory protocol."""

from __future__ import annotations

import sys

import typer

app = typer.Typer(help="The ATDP trajectory protocol: print its JSON Schema.", no_args_is_help=True)


@app.command("schema")
def schema() -> None:
    """Print the ATDP JSON Schema (the same as atdp/schema/atdp.schema.json)."""
    from atdp.schema import schema_text

    sys.stdout.write(schema_text())
