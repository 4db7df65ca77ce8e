"""`evoplane export` and `evoplane gc`: captured data out (for trainers) and away (retention)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress

from evoplane.cli.admin_cmd import _engine

console = Console(soft_wrap=True, stderr=True)


def export(
    agent: str = typer.Option(..., help="The agent whose trajectories to export."),
    out: Path = typer.Option(..., help="Output file."),
    tenant: str | None = typer.Option(
        None, help="Only this tenant's data (default: every tenant)."
    ),
    since: datetime | None = typer.Option(
        None, help="Only trajectories started at or after this time."
    ),
    format: str = typer.Option("jsonl", help="jsonl | parquet"),
) -> None:
    """Export training-eligible trajectories with their effective rewards (TRL/verl-ready)."""
    from registry import ALL_TENANTS, export_records, transaction

    if format not in {"jsonl", "parquet"}:
        raise typer.BadParameter("use jsonl or parquet", param_hint="--format")
    records = []
    with transaction(_engine()) as session, Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"exporting {agent}", total=None)
        for record in export_records(session, tenant or ALL_TENANTS, agent, since=since):
            records.append(record)
            progress.advance(task)
    out.parent.mkdir(parents=True, exist_ok=True)
    if format == "jsonl":
        with out.open("w") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        flat = [
            {
                **r,
                "steps": json.dumps(r["steps"]),
                "events": json.dumps(r["events"]),
                "outcome": json.dumps(r["outcome"]),
            }
            for r in records
        ]
        pq.write_table(pa.Table.from_pylist(flat), out)
    steps = sum(len(r["steps"]) for r in records)
    console.print(
        f"wrote {len(records)} trajectories ({steps} llm calls) to {out}", highlight=False
    )


def gc() -> None:
    """Purge what is past its retention (expires_at): events, their rewards, emptied
    trajectories and stored responses."""
    from atdp import utcnow
    from registry import purge_expired, transaction

    with transaction(_engine()) as session:
        counts = purge_expired(session, utcnow())
    console.print(
        f"purged {counts['events']} events, {counts['rewards']} rewards, "
        f"{counts['trajectories']} trajectories, {counts['responses']} stored responses",
        highlight=False,
    )
