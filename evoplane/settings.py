"""The one settings object: `EVOPLANE_*` env vars, then `evoplane.toml`, then defaults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from pydantic import Field, SecretStr
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

__all__ = ["Settings", "SettingsError", "load_settings"]

CONFIG_ENV = "EVOPLANE_CONFIG"
DEFAULT_CONFIG = "evoplane.toml"
# Bind addresses meaning "every interface": where a service listens, never where to open it.
WILDCARD_HOSTS = ("0.0.0.0", "::", "[::]", "")


class SettingsError(ValueError):
    """A setting names something that cannot be used; the message says which and how to fix it."""


class Settings(BaseSettings):
    """Where Evoplane keeps its data and how its services are reached.

    Each field is read from `EVOPLANE_<FIELD>` (e.g. `EVOPLANE_DATABASE_URL`), else from
    `evoplane.toml` in the working directory (or the file named by `EVOPLANE_CONFIG`),
    else the default.
    """

    model_config = SettingsConfigDict(env_prefix="EVOPLANE_", extra="forbid")

    data_dir: Path = Field(default=Path(".evoplane"), description="Embedded data lives here.")
    database_url: str | None = Field(
        default=None,
        description="Registry database; default SQLite in the data dir. "
        "PostgreSQL: postgresql+psycopg://user@host:5432/db",
    )
    host: str = Field(default="127.0.0.1", description="Address the embedded services bind.")
    temporal_address: str | None = Field(
        default=None, description="Temporal frontend host:port; default the embedded server."
    )
    temporal_namespace: str = "default"
    temporal_port: int = Field(default=7233, ge=1, le=65535)
    temporal_ui_port: int = Field(default=8233, ge=1, le=65535)
    temporal_ui: str | None = Field(
        default=None,
        description="The Temporal Web UI's address as people open it (the links in MLflow "
        "runs and the control API); default the embedded UI.",
    )
    temporal_tls: bool = Field(
        default=False,
        description="Connect to Temporal over TLS (implied by a CA, a client certificate or "
        "an API key).",
    )
    temporal_tls_ca: Path | None = Field(
        default=None, description="PEM file of the CA that signed Temporal's server certificate."
    )
    temporal_tls_cert: Path | None = Field(
        default=None, description="PEM client certificate for mTLS (with temporal_tls_key)."
    )
    temporal_tls_key: Path | None = Field(
        default=None, description="PEM private key of temporal_tls_cert."
    )
    temporal_api_key: SecretStr | None = Field(
        default=None, description="API key for Temporal Cloud or a server that asks for one."
    )
    mlflow_uri: str | None = Field(
        default=None, description="MLflow tracking URI; default the embedded server."
    )
    mlflow_port: int = Field(default=5000, ge=1, le=65535)
    mlflow_backend_uri: str | None = Field(
        default=None,
        description="MLflow's backend store; default SQLite in the data dir. "
        "A PostgreSQL URL keeps MLflow's tables there.",
    )
    gateway_port: int = Field(default=8400, ge=1, le=65535)
    gateway_max_body_bytes: int = Field(default=4 * 2**20, ge=1024)
    gateway_rate_limit: float | None = Field(
        default=None, gt=0, description="Requests per second per tenant (burst: 2 s worth)."
    )
    upstream_timeout: float = Field(default=120.0, gt=0)
    mcp_timeout: float = Field(
        default=30.0, gt=0, description="Seconds an upstream MCP server may take over a request."
    )
    event_codec: Literal["on", "off"] = Field(
        default="on",
        description="off: store event bodies whole, for a rolling upgrade while processes "
        "older than the codec still read the registry (`registry.bodies`).",
    )
    upstream_api_key: SecretStr | None = Field(
        default=None, description="Bearer key for OpenAI-compatible upstreams that need one."
    )
    local_device: str = Field(
        default="cpu", description="Where `local` engine models run: cpu, cuda or cuda:N."
    )
    local_threads: int | None = Field(
        default=None,
        ge=1,
        description="torch threads for `local` models; 1 is fastest on a small CPU machine.",
    )
    local_max_models: int = Field(default=4, ge=1, description="`local` models kept loaded.")
    catalog_ttl: float = Field(
        default=2.0,
        gt=0,
        description="Seconds a gateway may route by a cached alias, key or grant after it "
        "changed. On PostgreSQL changes are announced and apply at once; the TTL bounds what "
        "an announcement missed, and on SQLite it is the bound.",
    )
    resume_wait: float = Field(
        default=1.0,
        ge=0,
        description="Seconds a gateway waits for the registry to hold the answer a request "
        "ends with when another gateway served it (its capture is on the way), so the "
        "session goes on as one trajectory; overlaps the upstream call.",
    )
    placement_deadline: float = Field(
        default=0.5,
        gt=0,
        description="Seconds a new session's first request waits for the registry to say "
        "whether the session was placed before; overlaps the upstream call. After it, or at "
        "once while the registry is not answering, the session's hash places it, and the "
        "registry is told when it is back.",
    )
    api_port: int = Field(default=8401, ge=1, le=65535)
    gateway_url: str | None = Field(
        default=None,
        description="The gateway's /v1 URL workers call for evaluation traffic; default the "
        "embedded gateway (behind a load balancer in production).",
    )
    admin_token: SecretStr | None = None
    worker_activity_threads: int = Field(
        default=8,
        ge=1,
        description="Threads a worker runs its synchronous activities in, off its event "
        "loop; it takes as many evoplane-control activities at once (a --gpu worker adds "
        "one thread for its training job).",
    )
    tool_simulators: str | None = Field(
        default=None,
        description="module:attribute of a mapping from name to tool simulator, offered by "
        "this worker to tenants who register a simulator by name for the replay gate.",
    )
    seal_key: SecretStr | None = Field(
        default=None,
        description="Key for sealed raw copies of redacted events (`evoplane key seal-key`).",
    )
    otel_endpoint: str | None = Field(
        default=None,
        description="OTLP/HTTP collector (base URL, or its /v1/traces URL) the gateway sends "
        "an OpenTelemetry GenAI span per served call to; unset: no spans.",
    )
    otel_headers: SecretStr | None = Field(
        default=None,
        description="Headers of each export, `name=value,name=value` as in "
        "OTEL_EXPORTER_OTLP_HEADERS (MLflow wants x-mlflow-experiment-id=ID).",
    )
    otel_content: bool = Field(
        default=False,
        description="Also put each call's messages on its span, as redaction stored them.",
    )
    otel_service_name: str = Field(default="evoplane-gateway", description="The spans' service.")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        toml_file = Path(os.environ.get(CONFIG_ENV, DEFAULT_CONFIG))
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file))

    # Derived values: one place decides each default.

    @property
    def registry_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir.resolve() / 'registry.db'}"

    @property
    def temporal_target(self) -> str:
        return self.temporal_address or f"{self.host}:{self.temporal_port}"

    @property
    def temporal_ui_url(self) -> str:
        return self.temporal_ui or f"http://{self.host}:{self.temporal_ui_port}"

    @property
    def temporal_ui_link(self) -> str:
        """The Temporal UI as people open it, for links (MLflow runs, control API answers):
        EVOPLANE_TEMPORAL_UI, else the embedded UI, on loopback when it binds every
        interface (in a container `0.0.0.0` is where it listens, never an address to open)."""
        if self.temporal_ui:
            return self.temporal_ui.rstrip("/")
        host = "127.0.0.1" if self.host in WILDCARD_HOSTS else self.host
        return f"http://{host}:{self.temporal_ui_port}"

    @property
    def gateway_api(self) -> str:
        return self.gateway_url or f"http://{self.host}:{self.gateway_port}/v1"

    @property
    def tracking_uri(self) -> str:
        return self.mlflow_uri or f"http://{self.host}:{self.mlflow_port}"

    @property
    def mlflow_backend_store(self) -> str:
        return self.mlflow_backend_uri or f"sqlite:///{self.data_dir.resolve() / 'mlflow.db'}"

    @property
    def otel_header_map(self) -> dict[str, str]:
        """`otel_headers` as a mapping: comma-separated `name=value` pairs, values
        percent-decoded (the OTEL_EXPORTER_OTLP_HEADERS format)."""
        text = self.otel_headers.get_secret_value() if self.otel_headers else ""
        headers = {}
        for number, pair in enumerate(filter(None, map(str.strip, text.split(","))), 1):
            name, equals, value = pair.partition("=")
            if not equals or not name.strip():
                # The entry is not echoed: it may hold a token.
                raise SettingsError(
                    f"EVOPLANE_OTEL_HEADERS entry {number} is not `name=value`; "
                    "separate headers with commas, e.g. x-mlflow-experiment-id=1,authorization=..."
                )
            headers[name.strip().lower()] = unquote(value.strip())
        return headers

    @property
    def embedded_temporal(self) -> bool:
        return self.temporal_address is None

    @property
    def embedded_mlflow(self) -> bool:
        return self.mlflow_uri is None


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment and config file, with CLI flags given as overrides.

    `event_codec` is handed on in the environment, where the registry's writers read it,
    in this process and the ones it starts (the capture drain)."""
    settings = Settings(**{key: value for key, value in overrides.items() if value is not None})
    os.environ["EVOPLANE_EVENT_CODEC"] = settings.event_codec
    return settings
