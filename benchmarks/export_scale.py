"""Export at scale: `evoplane export` of a day of a busy agent's traffic, to Parquet and JSONL.

    .venv/bin/python -m benchmarks.export_scale [--trajectories 10000,100000]
        [--database-url postgresql+psycopg://postgres@127.0.0.1:5432/test] [--formats parquet,jsonl]

For each size: a fresh schema seeded as `benchmarks.window_analysis` seeds it (gateway-shaped
trajectories COPYed across one day, about 10 events each), then `evoplane export` in its own
process, once per format. Prints the wall time, the exporting process's peak resident memory,
the rows written and the file's size. The memory should not grow with the size: the export
streams a page of trajectories at a time (`registry.export_page`). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import sqlalchemy as sa

from atdp import utcnow
from benchmarks.support import POSTGRES, ROOT, drop_schema, fresh_schema_url
from benchmarks.window_analysis import AGENT, seed
from registry import create_db_engine, upgrade

FORMATS = ("parquet", "jsonl")


@dataclass
class Export:
    format: str
    seconds: float
    peak_mib: float
    trajectories: int
    bytes: int


@dataclass
class Run:
    trajectories: int
    events: int
    seed_s: float
    exports: list[Export]


def export(url: str, format: str, out: Path) -> Export:
    """`evoplane export` in a process of its own: its time and peak memory."""
    command = [str(Path(sys.executable).with_name("evoplane")), "export", "--agent", AGENT]
    command += ["--out", str(out), "--format", format]
    with tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            cwd=ROOT,
            env={**os.environ, "EVOPLANE_DATABASE_URL": url},
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        _, status, usage = os.wait4(process.pid, 0)  # this process's own peak memory
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        stderr.seek(0)
        said = stderr.read().decode()
    if process.returncode != 0:
        raise RuntimeError(f"evoplane export failed: {said[-2000:]}")
    written = int(said.split("wrote ", 1)[1].split()[0])
    return Export(format, seconds, usage.ru_maxrss / 1024, written, out.stat().st_size)


def run(database_url: str, trajectories: int, formats: list[str]) -> Run:
    url, schema = fresh_schema_url(url=database_url)
    try:
        engine = create_db_engine(url)
        upgrade(engine)
        started = time.perf_counter()
        seed(engine, trajectories, utcnow() + timedelta(minutes=10))
        seeded = time.perf_counter() - started
        with engine.connect() as connection:
            events = connection.execute(sa.text("SELECT count(*) FROM event")).scalar_one()
        engine.dispose()
        with tempfile.TemporaryDirectory() as folder:
            exports = [export(url, f, Path(folder) / f"export.{f}") for f in formats]
        return Run(trajectories, events, seeded, exports)
    finally:
        drop_schema(schema, database_url)


def report(runs: list[Run]) -> list[str]:
    lines = [
        "| trajectories | events | format | export (s) | peak RSS of the CLI (MiB) "
        "| trajectories written | file (MiB) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        for e in r.exports:
            lines.append(
                f"| {r.trajectories:,} | {r.events:,} | {e.format} | {e.seconds:.1f} "
                f"| {e.peak_mib:.0f} | {e.trajectories:,} | {e.bytes / 2**20:.0f} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", default="10000,100000", help="sizes, comma-separated")
    parser.add_argument("--database-url", default=POSTGRES)
    parser.add_argument("--formats", default=",".join(FORMATS), help="parquet, jsonl or both")
    args = parser.parse_args()
    formats = [f for f in args.formats.split(",") if f]
    if not set(formats) <= set(FORMATS):
        parser.error(f"--formats: choose from {', '.join(FORMATS)}")
    runs = []
    for size in sorted(int(s) for s in args.trajectories.split(",") if s):
        runs.append(run(args.database_url, size, formats))
        print(f"{size:,} trajectories seeded in {runs[-1].seed_s:.0f} s", flush=True)
    print("\n".join(report(runs)))


if __name__ == "__main__":
    main()
