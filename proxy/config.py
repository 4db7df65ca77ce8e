"""The gateway's typed configuration, built by the shell from settings (proxy never reads env)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["GatewayConfig"]


@dataclass(frozen=True)
class GatewayConfig:
    """Everything `create_app` needs.

    Args:
        database_url: the registry.
        spool_dir: where capture records wait for the registry (crash-safe).
        rate_limit: requests per second per tenant, None for no limit.
        catalog_ttl: seconds a cached alias, key or grant may be stale when no announcement
            of its change arrives (SQLite, or a gateway reconnecting to PostgreSQL).
        local_device: where versions with the `local` engine run ("cpu", "cuda", "cuda:N").
        local_max_models: local models kept loaded; the least recently used is unloaded
            once its requests in flight have finished.
        local_threads: torch intra-op threads (process-wide); None keeps torch's default.
            On a small CPU machine 1 is fastest: each concurrent generation has a thread.
        otel_endpoint: an OTLP/HTTP collector (its base URL, or its `/v1/traces` URL): each
            served call is exported there as an OpenTelemetry GenAI span. None: no spans.
        otel_headers: sent with each export (an MLflow server wants `x-mlflow-experiment-id`).
        otel_content: also put the call's messages, as redaction stored them, on its span.
        resume_wait: seconds a request that shows an answer this process did not record
            waits for the registry to hold it (another gateway served it and its capture is
            on the way, about `capture_flush_interval`), so the session goes on as one
            trajectory; it overlaps the upstream call. After it, a new trajectory starts.
        placement_deadline: seconds a new session's first request waits for the registry to
            say whether the session was placed before (another gateway, an earlier run); it
            overlaps the upstream call. After it, or at once while the registry is not
            answering, the session's hash places it and the registry is told when it is back
            (`proxy.router`).
        registry_timeout: seconds a registry read a request cannot do without (nothing
            cached: a new key, tenant or version) may take; after it, with the registry not
            answering, the request fails with 503 `registry_unreachable`.
    """

    database_url: str
    spool_dir: Path
    max_body_bytes: int = 4 * 2**20
    rate_limit: float | None = None
    upstream_timeout: float = 120.0
    upstream_connect_timeout: float = 5.0
    mcp_timeout: float = 30.0  # seconds an upstream MCP server may take over one request
    upstream_api_key: str | None = None
    catalog_ttl: float = 2.0
    seal_key: str | None = None  # Fernet key for sealed raw copies (tenants that ask for them)
    abandon_after: float = 1800.0  # seconds of silence after which a session is closed
    resume_wait: float = 1.0
    placement_deadline: float = 0.5
    registry_timeout: float = 5.0
    sweep_interval: float = 30.0
    capture_batch_size: int = 500
    capture_flush_interval: float = 0.2  # also the most a power cut can lose (fsync per batch)
    local_device: str = "cpu"
    local_dtype: str = "float32"  # a torch dtype name: "bfloat16" halves a GPU model's memory
    local_max_concurrency: int = 8  # requests decoding together per local model; the rest queue
    local_max_models: int = 4
    local_max_tokens: int = 512  # completion length when a request sets no max_tokens
    local_threads: int | None = None
    otel_endpoint: str | None = None
    otel_headers: Mapping[str, str] = field(default_factory=dict)
    otel_content: bool = False
    otel_service_name: str = "evoplane-gateway"
