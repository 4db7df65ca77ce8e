"""`evoplane up`: Temporal and MLflow answer, search attributes are registered, and Ctrl-C
(SIGTERM) leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from evoplane.stack.launcher import READY_LINE
from tests.conftest import free_port

pytestmark = pytest.mark.slow
EVOPLANE = str(Path(sys.executable).parent / "evoplane")


def stack_env(tmp_path: Path) -> dict[str, str]:
    names = ("TEMPORAL_PORT", "TEMPORAL_UI_PORT", "MLFLOW_PORT", "GATEWAY_PORT", "API_PORT")
    ports = {name: str(free_port()) for name in names}
    base = {k: v for k, v in os.environ.items() if not k.startswith("EVOPLANE_")}
    return {
        **base,
        "EVOPLANE_DATA_DIR": str(tmp_path / "data"),
        **{f"EVOPLANE_{k}": v for k, v in ports.items()},
    }


def wait_for_line(process: subprocess.Popen, line: str, timeout: float) -> str:
    seen = []
    deadline = time.monotonic() + timeout
    os.set_blocking(process.stdout.fileno(), False)
    while time.monotonic() < deadline:
        chunk = process.stdout.readline()
        if chunk:
            seen.append(chunk)
            if line in chunk:
                return "".join(seen)
        elif process.poll() is not None:
            break
        else:
            time.sleep(0.1)
    raise AssertionError(f"never saw {line!r}; output so far:\n{''.join(seen)}")


async def registered_search_attributes(address: str) -> set[str]:
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
    from temporalio.client import Client

    client = await Client.connect(address)
    response = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default")
    )
    return set(response.custom_attributes)


def descendants_once_jobs_started(pid: int, timeout: float = 90) -> list[psutil.Process]:
    """The launcher's process tree, once MLflow's job runner has started its consumers."""
    deadline = time.monotonic() + timeout
    while True:
        children = psutil.Process(pid).children(recursive=True)
        commands = [" ".join(child.cmdline()) for child in children if child.is_running()]
        if any("huey_consumer" in command for command in commands) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert any("huey_consumer" in command for command in commands), commands
    assert any("temporal" in command for command in commands), commands
    return children


def test_up_serves_both_uis_and_stops_cleanly(tmp_path: Path) -> None:
    # MLflow's job runner on: its huey consumers are the deepest process tree to clean up.
    env = {**stack_env(tmp_path), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "true"}
    process = subprocess.Popen(
        [EVOPLANE, "up"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        output = wait_for_line(process, READY_LINE, timeout=240)
        temporal_ui = f"http://127.0.0.1:{env['EVOPLANE_TEMPORAL_UI_PORT']}"
        mlflow = f"http://127.0.0.1:{env['EVOPLANE_MLFLOW_PORT']}"
        assert temporal_ui in output and mlflow in output
        assert httpx.get(temporal_ui, timeout=10).status_code == 200
        assert httpx.get(mlflow, timeout=10).status_code == 200
        assert httpx.get(f"{mlflow}/health", timeout=10).text.strip() == "OK"
        gateway = f"http://127.0.0.1:{env['EVOPLANE_GATEWAY_PORT']}"
        assert f"{gateway}/v1" in output
        assert httpx.get(f"{gateway}/healthz", timeout=10).json()["status"] == "ok"
        unauthorised = httpx.get(f"{gateway}/v1/models", timeout=10)
        assert unauthorised.status_code == 401 and "error" in unauthorised.json()
        api = f"http://127.0.0.1:{env['EVOPLANE_API_PORT']}"
        token = (tmp_path / "data" / "admin-token").read_text().strip()
        assert f"admin token: {token}" in output
        agents = httpx.get(f"{api}/api/agents", headers={"Authorization": f"Bearer {token}"})
        assert agents.status_code == 200 and agents.json() == []
        assert httpx.get(f"{api}/api/agents", timeout=10).status_code == 401
        assert (
            "worker serving evoplane-control, evoplane-gpu"
            in (tmp_path / "data" / "logs" / "worker.log").read_text()
        )
        attributes = asyncio.run(
            registered_search_attributes(f"127.0.0.1:{env['EVOPLANE_TEMPORAL_PORT']}")
        )
        assert {"Agent", "Tenant", "Action", "Stage", "Outcome"} <= attributes

        check = subprocess.run(
            [EVOPLANE, "up", "--check"], env=env, capture_output=True, text=True, timeout=60
        )
        assert check.returncode == 0, check.stdout + check.stderr
        assert check.stdout.count("healthy") >= 6

        children = descendants_once_jobs_started(process.pid)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
        _, alive = psutil.wait_procs(children, timeout=15)
        assert alive == [], f"left running: {[p.cmdline() for p in alive]}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()

    down = subprocess.run(
        [EVOPLANE, "up", "--check"], env=env, capture_output=True, text=True, timeout=60
    )
    assert down.returncode == 1 and "down" in down.stdout


def test_up_refuses_a_taken_port_and_starts_nothing(tmp_path: Path) -> None:
    env = stack_env(tmp_path)
    port = int(env["EVOPLANE_MLFLOW_PORT"])
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        result = subprocess.run(
            [EVOPLANE, "up"], env=env, capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1
    assert f"port {port}" in result.stderr and "MLflow" in result.stderr
    assert "EVOPLANE_MLFLOW_PORT" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "logs").exists()  # nothing was started
