"""The `evoplane` command as a user runs it: help, db commands, and errors that say what to do."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from registry import head_revision
from tests.conftest import free_port

EVOPLANE = str(Path(sys.executable).parent / "evoplane")


def run(
    *args: str, env: dict | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")}
    return subprocess.run(
        [EVOPLANE, *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def test_help_lists_every_command_with_its_purpose() -> None:
    result = run("--help")
    assert result.returncode == 0
    for command, purpose in [
        ("up", "embedded stack"),
        ("atdp", "JSON Schema"),
        ("db", "migrations"),
    ]:
        line = next(line for line in result.stdout.splitlines() if f" {command} " in line)
        assert purpose in line or purpose in result.stdout


def test_db_upgrade_then_current(tmp_path: Path) -> None:
    env = {"EVOPLANE_DATA_DIR": str(tmp_path / "data")}
    before = run("db", "current", env=env)
    assert "empty" in before.stdout and "run `evoplane db upgrade`" in before.stdout
    first = run("db", "upgrade", env=env)
    assert first.returncode == 0 and f"empty -> {head_revision()}" in first.stdout
    again = run("db", "upgrade", env=env)
    assert f"already at revision {head_revision()}" in again.stdout
    assert "up to date" in run("db", "current", env=env).stdout


def test_unreachable_postgres_gives_one_clear_line(tmp_path: Path) -> None:
    result = run(
        "db",
        "upgrade",
        env={"EVOPLANE_DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:1/none"},
    )
    assert result.returncode == 1
    assert "refused the connection" in result.stderr
    assert "unset EVOPLANE_DATABASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_wrong_postgres_driver_is_explained() -> None:
    result = run(
        "db",
        "current",
        env={"EVOPLANE_DATABASE_URL": "postgresql+psycopg2://postgres@127.0.0.1/test"},
    )
    assert result.returncode == 1
    assert "postgresql+psycopg://" in result.stderr and "Traceback" not in result.stderr


def test_agent_evolution_settings_are_validated_stored_and_shown(tmp_path: Path) -> None:
    env = {"EVOPLANE_DATA_DIR": str(tmp_path / "data")}
    assert run("db", "upgrade", env=env).returncode == 0
    created = run("agent", "create", "helpdesk", "--base-url", "http://127.0.0.1:9/v1", env=env)
    assert created.returncode == 0, created.stderr
    good = tmp_path / "settings.json"
    good.write_text(json.dumps({"gate": {"min_samples": 50, "step_weights": [0.1, 0.5]}}))
    assert run("agent", "configure", "helpdesk", "--file", str(good), env=env).returncode == 0
    shown = json.loads(run("agent", "settings", "helpdesk", env=env).stdout)
    assert shown["gate"]["min_samples"] == 50 and shown["gate"]["step_weights"] == [0.1, 0.5]
    assert shown["gate"]["confidence"] == 0.95  # defaults filled in
    assert shown["safety_suite"] is None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gate": {"step_weights": [0.5, 0.1]}}))  # not increasing
    refused = run("agent", "configure", "helpdesk", "--file", str(bad), env=env)
    assert refused.returncode != 0 and "step_weights" in refused.stderr
    after = json.loads(run("agent", "settings", "helpdesk", env=env).stdout)
    assert after["gate"]["step_weights"] == [0.1, 0.5]  # nothing half-written


def test_a_tenant_may_keep_sealed_raw_copies_for_named_readers(tmp_path: Path) -> None:
    from registry import create_db_engine, get_tenant, transaction

    data = tmp_path / "data"
    env = {"EVOPLANE_DATA_DIR": str(data)}
    assert run("db", "upgrade", env=env).returncode == 0
    refused = run("tenant", "create", "acme", "--sealed-reader", "rl-job", env=env)
    assert refused.returncode != 0 and "--seal-raw" in refused.stderr
    created = run("tenant", "create", "acme", "--seal-raw", "--sealed-reader", "rl-job", env=env)
    assert created.returncode == 0, created.stderr
    assert "sealed raw copies for rl-job" in created.stdout
    engine = create_db_engine(f"sqlite:///{data / 'registry.db'}")
    with transaction(engine) as session:
        policy = get_tenant(session, "acme").policy
    assert policy.seal_raw and policy.sealed_readers == ["rl-job"]


def _get_on(connection: socket.socket, path: str) -> bytes:
    """One HTTP/1.1 GET on an open connection; the response's head and body (b"" at EOF)."""
    connection.sendall(f"GET {path} HTTP/1.1\r\nHost: gateway\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@pytest.mark.slow
def test_the_gateway_keeps_an_idle_connection_past_an_sdk_clients_expiry(tmp_path) -> None:
    """httpx (under the openai SDK) reuses an idle connection for 5 s: a server that closes
    idle connections at 5 s too races it, and a request sent as it closes is lost."""
    port = free_port()
    env = {"EVOPLANE_DATA_DIR": str(tmp_path), "EVOPLANE_GATEWAY_PORT": str(port)}
    assert run("db", "upgrade", env=env).returncode == 0
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")}
    gateway = subprocess.Popen(
        [EVOPLANE, "gateway"], env={**base, **env}, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                connection = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                assert time.monotonic() < deadline and gateway.poll() is None, "no gateway"
                time.sleep(0.2)
        with connection:
            assert _get_on(connection, "/healthz").startswith(b"HTTP/1.1 200")
            time.sleep(6.5)  # idle past 5 s, on the same connection
            assert _get_on(connection, "/healthz").startswith(b"HTTP/1.1 200")
    finally:
        os.killpg(gateway.pid, signal.SIGTERM)
        gateway.wait(timeout=30)
