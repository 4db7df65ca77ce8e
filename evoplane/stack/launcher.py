"""`evoplane up`: run the embedded stack in the foreground, and `--check` its health."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from evoplane.settings import Settings
from evoplane.stack.process import tail
from evoplane.stack.services import Service, embedded_services, http_ok, tcp_open
from registry import (
    SchemaOutOfDateError,
    check_schema,
    create_db_engine,
    current_revision,
    describe_url,
    upgrade,
)

__all__ = [
    "HealthReport",
    "StackError",
    "admin_token_of",
    "check_stack",
    "prepare_registry",
    "run_stack",
    "start_service",
]

READY_LINE = "Evoplane is up."


class StackError(RuntimeError):
    """A service could not start or stopped unexpectedly."""


def prepare_registry(settings: Settings) -> str:
    """Create the registry schema in an empty database; refuse one that is behind.

    A new database has nothing to lose, so it is initialised; migrating existing data
    is left to an explicit `evoplane db upgrade`.
    """
    engine = create_db_engine(settings.registry_url)
    try:
        if current_revision(engine) is None:
            upgrade(engine)
        check_schema(engine)
        return describe_url(engine.url)
    finally:
        engine.dispose()


@contextmanager
def _stop_signals() -> Iterator[threading.Event]:
    """An event set by SIGINT or SIGTERM while the block runs."""
    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda *_: stop.set())
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def start_service(service: Service, stop: threading.Event | None = None) -> None:
    """Start `service` and wait until it answers.

    Raises:
        StackError: it exited while starting, or did not answer within its startup timeout.
        KeyboardInterrupt: `stop` was set while waiting.
    """
    stop = stop or threading.Event()
    service.process.start()
    waited = 0.0
    while not service.healthy():
        code = service.process.exited()
        if code is not None:
            raise StackError(
                f"{service.name} exited with code {code} while starting; last lines of "
                f"{service.process.log_path}:\n{tail(service.process.log_path)}"
            )
        if stop.wait(0.25):
            raise KeyboardInterrupt
        waited += 0.25
        if waited > service.startup_timeout:
            raise StackError(
                f"{service.name} did not become healthy within {service.startup_timeout:.0f}s; "
                f"see {service.process.log_path}"
            )


def _start(service: Service, stop: threading.Event, console: Console) -> None:
    with console.status(f"starting {service.name} (log: {service.process.log_path})"):
        start_service(service, stop)
    console.print(f"[green]✓[/green] {service.name} is up")


def admin_token_of(settings: Settings) -> str:
    """The control API's token: configured, or generated once into the data dir."""
    from evoplane.control.config import admin_token

    configured = settings.admin_token.get_secret_value() if settings.admin_token else None
    return admin_token(configured, settings.data_dir)


def _url_table(services: list[Service], registry: str) -> Table:
    table = Table(title="Evoplane", show_header=True)
    table.add_column("service")
    table.add_column("address")
    table.add_row("registry", registry)
    for service in services:
        for label, url in service.urls.items():
            table.add_row(label, url)
    return table


def run_stack(settings: Settings, console: Console | None = None) -> int:
    """Start every embedded service, wait for Ctrl-C or SIGTERM, then stop them all."""
    console = console or Console()
    services = embedded_services(settings)
    for service in services:
        service.check_ports(settings.host)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    registry = prepare_registry(settings)
    token = admin_token_of(settings)
    started: list[Service] = []
    with _stop_signals() as stop:
        try:
            for service in services:
                started.append(service)
                _start(service, stop, console)
            console.print(_url_table(services, registry))
            console.print(
                f"Control API admin token: {token} (also in {settings.data_dir / 'admin-token'}"
                " unless EVOPLANE_ADMIN_TOKEN is set)",
                highlight=False,
            )
            console.print(f"{READY_LINE} Press Ctrl-C to stop.", highlight=False)
            while not stop.wait(1.0):
                for service in started:
                    code = service.process.exited()
                    if code is not None:
                        raise StackError(
                            f"{service.name} stopped unexpectedly (exit code {code}); last lines "
                            f"of {service.process.log_path}:\n{tail(service.process.log_path)}"
                        )
        except KeyboardInterrupt:
            pass
        finally:
            with console.status("stopping"):
                for service in reversed(started):
                    service.process.stop()
            console.print("stopped.")
    return 0


@dataclass
class HealthReport:
    name: str
    address: str
    healthy: bool
    detail: str


def check_stack(settings: Settings) -> list[HealthReport]:
    """Health of the registry, Temporal and MLflow as configured (embedded or external)."""
    reports = [_check_registry(settings)]
    host, _, port = settings.temporal_target.rpartition(":")
    temporal_up = tcp_open(host or settings.host, int(port))
    reports.append(
        HealthReport(
            "temporal",
            settings.temporal_target,
            temporal_up,
            "accepting connections" if temporal_up else "not reachable",
        )
    )
    if settings.embedded_temporal:
        ui_up = http_ok(settings.temporal_ui_url)
        reports.append(
            HealthReport(
                "temporal-ui", settings.temporal_ui_url, ui_up, "200 OK" if ui_up else "no answer"
            )
        )
    mlflow_up = http_ok(f"{settings.tracking_uri}/health")
    reports.append(
        HealthReport(
            "mlflow", settings.tracking_uri, mlflow_up, "healthy" if mlflow_up else "no answer"
        )
    )
    gateway = f"http://{settings.host}:{settings.gateway_port}"
    gateway_up = http_ok(f"{gateway}/healthz")
    reports.append(
        HealthReport(
            "gateway", f"{gateway}/v1", gateway_up, "healthy" if gateway_up else "no answer"
        )
    )
    api = f"http://{settings.host}:{settings.api_port}"
    api_up = http_ok(f"{api}/openapi.json")
    reports.append(HealthReport("control-api", api, api_up, "healthy" if api_up else "no answer"))
    return reports


def _check_registry(settings: Settings) -> HealthReport:
    address = describe_url(settings.registry_url)
    try:
        engine = create_db_engine(settings.registry_url)
    except Exception as error:  # noqa: BLE001 - reported, not raised
        return HealthReport("registry", address, False, str(error))
    try:
        check_schema(engine)
        return HealthReport("registry", address, True, "schema up to date")
    except SchemaOutOfDateError as error:
        return HealthReport("registry", address, False, str(error))
    finally:
        engine.dispose()
