"""The stack a simulation talks to (the demo, the scenario suite): a running one's endpoints,
or `evoplane up`'s services started for the length of the run (Temporal and MLflow only
where the settings name none)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from evoplane.settings import Settings

__all__ = ["EMBEDDED_CATALOG_TTL", "Endpoints", "endpoints_of", "stack"]

EMBEDDED_CATALOG_TTL = 0.5  # seconds


@dataclass(frozen=True)
class Endpoints:
    """Where the stack's services are."""

    gateway: str  # the OpenAI base_url, ".../v1"
    control: str
    admin_token: str
    registry_url: str
    temporal_ui: str | None = None
    mlflow: str | None = None
    catalog_ttl: float = 2.0  # how long the gateway may still route by aliases that moved


def endpoints_of(settings: Settings) -> Endpoints:
    from evoplane.stack.launcher import admin_token_of

    return Endpoints(
        gateway=settings.gateway_api,
        control=f"http://{settings.host}:{settings.api_port}",
        admin_token=admin_token_of(settings),
        registry_url=settings.registry_url,
        temporal_ui=settings.temporal_ui_link,
        mlflow=settings.tracking_uri,
        catalog_ttl=settings.catalog_ttl,
    )


@contextmanager
def stack(
    settings: Settings,
    *,
    use_running: bool = False,
    started: Callable[[str], None] = lambda name: None,
) -> Iterator[Endpoints]:
    """The endpoints of a running stack, or of the embedded one started here and stopped
    on the way out.

    Raises:
        StackError: the running stack misses a service, or one would not start.
    """
    from evoplane.stack.launcher import StackError, check_stack, prepare_registry, start_service
    from evoplane.stack.services import embedded_services

    if use_running:
        down = [report.name for report in check_stack(settings) if not report.healthy]
        if down:
            raise StackError(
                f"the running stack is missing {', '.join(down)}; start it with `evoplane up` "
                "(or drop --use-running to let the run start its own)"
            )
        yield endpoints_of(settings)
        return
    # One torch thread is far faster for the tiny model on a small CPU than torch's default;
    # the gateway (local engine) and the GPU worker (training) inherit these.
    os.environ.setdefault("EVOPLANE_LOCAL_THREADS", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # The rounds wait for alias moves to reach the gateway between evolutions: a short
    # cache keeps that wait short (the embedded registry is on this machine).
    if "EVOPLANE_CATALOG_TTL" not in os.environ:
        settings = settings.model_copy(update={"catalog_ttl": EMBEDDED_CATALOG_TTL})
    services = embedded_services(settings)
    for service in services:
        service.check_ports(settings.host)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    prepare_registry(settings)
    endpoints = endpoints_of(settings)  # writes the admin token before the API reads it
    running = []
    try:
        for service in services:
            running.append(service)
            start_service(service)
            started(service.name)
        yield endpoints
    finally:
        for service in reversed(running):
            service.process.stop()
