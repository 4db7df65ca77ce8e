"""`evoplane gateway`: the OpenAI-compatible gateway in the foreground."""

from __future__ import annotations

import gc
import os
from dataclasses import replace

import typer

from evoplane.settings import Settings, load_settings


def gateway_config(settings: Settings):
    """The gateway's typed config from settings (one place maps one to the other)."""
    from proxy.config import GatewayConfig

    return GatewayConfig(
        database_url=settings.registry_url,
        spool_dir=settings.data_dir.resolve() / "spool" / f"gateway-{settings.gateway_port}",
        max_body_bytes=settings.gateway_max_body_bytes,
        rate_limit=settings.gateway_rate_limit,
        upstream_timeout=settings.upstream_timeout,
        mcp_timeout=settings.mcp_timeout,
        upstream_api_key=settings.upstream_api_key.get_secret_value()
        if settings.upstream_api_key
        else None,
        seal_key=settings.seal_key.get_secret_value() if settings.seal_key else None,
        local_device=settings.local_device,
        local_threads=settings.local_threads,
        local_max_models=settings.local_max_models,
        catalog_ttl=settings.catalog_ttl,
        resume_wait=settings.resume_wait,
        placement_deadline=settings.placement_deadline,
        otel_endpoint=settings.otel_endpoint,
        otel_headers=settings.otel_header_map,
        otel_content=settings.otel_content,
        otel_service_name=settings.otel_service_name,
    )


# How long an idle client connection stays open. Longer than the idle expiry of agents' HTTP
# clients (httpx, under the openai SDK, drops idle connections after 5 s): with uvicorn's
# default, also 5 s, a client could send a request on a connection the server was closing
# at that moment, and fail with "Server disconnected without sending a response" (seen in
# the demo, on a POST that an SDK does not retry).
KEEP_ALIVE_SECONDS = 75


def gateway(
    port: int | None = typer.Option(None, help="Port [env: EVOPLANE_GATEWAY_PORT, default 8400]."),
    host: str | None = typer.Option(None, help="Bind address [env: EVOPLANE_HOST]."),
    workers: int = typer.Option(
        1,
        min=1,
        help="Processes serving the port, each with a capture spool and drain of its own: "
        "the kernel spreads connections over them, and any of them serves any session.",
    ),
) -> None:
    """Run the OpenAI-compatible gateway: point an agent's base_url at it."""
    import uvicorn

    from proxy.app import create_app
    from proxy.http_protocol import CoalescingHttpProtocol
    from registry import check_schema, create_db_engine

    settings = load_settings(gateway_port=port, host=host)
    engine = create_db_engine(settings.registry_url)
    check_schema(engine)
    engine.dispose()
    serving = {
        "host": settings.host,
        "port": settings.gateway_port,
        "log_level": "warning",
        "access_log": False,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        "http": CoalescingHttpProtocol,
    }
    if workers > 1:
        # Each worker process builds its own gateway from the same settings.
        os.environ["EVOPLANE_GATEWAY_PORT"] = str(settings.gateway_port)
        os.environ["EVOPLANE_HOST"] = settings.host
        uvicorn.run(f"{__name__}:worker_app", factory=True, workers=workers, **serving)
        return
    app = create_app(gateway_config(settings))
    _tune_gc()
    uvicorn.run(app, **serving)


def worker_app():
    """The gateway of one of `--workers N` processes, with a capture spool of its own."""
    from proxy.app import create_app
    from proxy.capture.spool import claim_spool

    config = gateway_config(load_settings())
    app = create_app(replace(config, spool_dir=claim_spool(config.spool_dir)))
    _tune_gc()
    return app


def _tune_gc() -> None:
    """Serving allocates many short-lived objects: collect the young generation less often,
    and keep what exists at start-up (imports, settings) out of every full collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 50, 100)
