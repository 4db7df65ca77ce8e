"""What the benchmarks share: the scripted upstream in its own process, a throwaway schema."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import sqlalchemy as sa

from registry import create_db_engine

__all__ = [
    "POSTGRES",
    "ROOT",
    "drop_schema",
    "fresh_schema_url",
    "start_announcing",
    "start_collector",
    "start_upstream",
    "stop_collector",
]

ROOT = Path(__file__).resolve().parent.parent
POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def start_announcing(module: str, *args: str) -> tuple[subprocess.Popen, str]:
    """`python -m module args` in its own process, which prints its address on its first
    line: (the process, that address). Its stdin is a pipe (closing it stops the
    process)."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def start_upstream(delay_ms: float) -> tuple[subprocess.Popen, str]:
    """The scripted upstream in its own process, so it shares neither our GIL nor our core.

    Returns the process (close its stdin to stop it) and its base URL.
    """
    return start_announcing("tests.support.upstream", "--delay-ms", str(delay_ms))


def start_collector() -> tuple[subprocess.Popen, str]:
    """An OTLP/HTTP trace collector in its own process (tests/support/otlp_collector.py).

    Returns the process (stop it with `stop_collector`) and its endpoint.
    """
    return start_announcing("tests.support.otlp_collector")


def stop_collector(process: subprocess.Popen) -> int:
    """Stop a collector from `start_collector`: how many spans it received."""
    output, _ = process.communicate(timeout=30)
    return int(output.split()[0])


def fresh_schema_url(prefix: str = "bench", url: str = POSTGRES) -> tuple[str, str]:
    """A new, empty PostgreSQL schema in the database at `url`: (URL with it first on the
    search path, schema name)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_db_engine(url)
    with admin.begin() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    admin.dispose()
    return str(sa.make_url(url).update_query_dict({"options": f"-csearch_path={schema}"})), schema


def drop_schema(schema: str, url: str = POSTGRES) -> None:
    admin = create_db_engine(url)
    with admin.begin() as connection:
        connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()
