"""`evoplane export` and `evoplane gc`: captured data out (for trainers) and away (retention)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
    out.parent.mkdir(parents=True, exist_ok=True)
    trajectories = steps = 0
    # Written as read, a page of trajectories at a time: memory stays bounded however much
    # traffic the export holds.
    with (
        transaction(_engine()) as session,
        Progress(console=console, transient=True) as progress,
        _writer(out, format) as write,
    ):
        task = progress.add_task(f"exporting {agent}", total=None)
        for record in export_records(session, tenant or ALL_TENANTS, agent, since=since):
            write(record)
            trajectories += 1
            steps += len(record["steps"])
            progress.advance(task)
    console.print(
        f"wrote {trajectories} trajectories ({steps} llm calls) to {out}", highlight=False
    )


@contextmanager
def _writer(out: Path, format: str) -> Iterator[Callable[[dict], None]]:
    """A function writing one export record to `out`: a JSON line, or a Parquet row
    (nested parts as JSON text), in row groups of a page of records."""
    if format == "jsonl":
        with out.open("w") as handle:
            yield lambda record: handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    from registry import EXPORT_PAGE

    text, nested = pa.string(), ("steps", "events", "outcome")
    schema = pa.schema(
        [(name, text) for name in ("trajectory_id", "tenant", "agent", "session", "version")]
        + [("task_type", text), ("outcome", text), ("reward", pa.float64())]
        + [("steps", text), ("events", text)]
    )
    rows: list[dict] = []
    with pq.ParquetWriter(out, schema) as parquet:

        def flush() -> None:
            parquet.write_table(pa.Table.from_pylist(rows, schema=schema))
            rows.clear()

        def write(record: dict) -> None:
            rows.append({**record, **{key: json.dumps(record[key]) for key in nested}})
            if len(rows) >= EXPORT_PAGE:
                flush()

        yield write
        if rows:
            flush()


def gc() -> None:
    """Purge what is past its retention (expires_at): events, their rewards, emptied
    trajectories and the tombstones of deleted stored responses; on PostgreSQL, whole
    expired days go as partitions and the days of the coming week are created (run it
    daily, e.g. from cron)."""
    from atdp import utcnow
    from registry import ensure_partitions, purge_expired, transaction

    engine = _engine()
    with transaction(engine) as session:
        counts = purge_expired(session, utcnow())
    created = ensure_partitions(engine, utcnow())
    console.print(
        f"purged {counts['events']} events, {counts['rewards']} rewards, "
        f"{counts['trajectories']} trajectories, "
        f"{counts['tombstones']} tombstones of deleted responses; "
        f"dropped {counts['partitions']} partitions, created {len(created)}",
        highlight=False,
    )
