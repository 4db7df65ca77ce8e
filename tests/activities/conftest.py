"""A real MLflow tracking server for the activity tests, started once per session."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoplane.settings import Settings
from evoplane.stack.process import tail
from evoplane.stack.services import Service, mlflow_service
from tests.conftest import free_port

STARTUP_TIMEOUT = 60.0


def _mlflow(data_dir: Path) -> Service:
    """`evoplane up`'s MLflow service on a free loopback port, with everything under data_dir."""
    port = free_port()
    settings = Settings(
        data_dir=data_dir,
        host="127.0.0.1",
        mlflow_port=port,
        mlflow_uri=f"http://127.0.0.1:{port}",
        mlflow_backend_uri=f"sqlite:///{data_dir / 'mlflow.db'}",
    )
    service = mlflow_service(settings)
    # The job runner's consumer processes would outlive a killed test run; never start them.
    service.process.env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    service.process.env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return service


def _wait_healthy(service: Service) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not service.healthy():
        code = service.process.exited()
        if code is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"MLflow did not become healthy (exit code {code}):\n"
                f"{tail(service.process.log_path, 40)}"
            )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tracking URI of a fresh `mlflow server` (SQLite backend, local artifacts).

    It runs in a process group of its own (ManagedProcess: setsid), stopped with killpg so
    its workers go with it.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    service = _mlflow(tmp_path_factory.mktemp("mlflow"))
    service.process.start()
    try:
        _wait_healthy(service)
        yield service.urls["MLflow UI"]
    finally:
        service.process.stop(grace=5.0)
