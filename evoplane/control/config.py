"""What the control API runs with: its configuration, the admin token and its check."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict
from sqlalchemy.engine import Engine
from temporalio.client import Client

__all__ = ["ControlConfig", "admin_token", "authorised", "ui_link"]


class ControlConfig(BaseModel):
    """What the control API needs; built by the shell from settings.

    Args:
        client: a connected Temporal client, or None to connect with `connect` at start-up
            (a client belongs to the event loop that serves the API).
        tracker: MLflow, where the review queue and evaluation sets are mirrored.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Engine
    client: Client | None = None
    connect: Callable[[], Awaitable[Client]] | None = None
    admin_token: str
    namespace: str = "default"
    temporal_ui_url: str | None = None
    # An `activities.tracking.EvolutionTracker`: MLflow mirrors the review queue (None: not).
    tracker: Any | None = None


def admin_token(configured: str | None, data_dir: Path) -> str:
    """The configured token, else one generated once into the data dir (mode 600)."""
    if configured:
        return configured
    path = data_dir / "admin-token"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    token = "evpadm_" + secrets.token_urlsafe(24)
    path.touch(mode=0o600)
    path.write_text(token + "\n")
    return token


# The OpenAPI security scheme of every route, so /docs's "Authorize" sends the token.
bearer = HTTPBearer(
    scheme_name="admin token",
    description="EVOPLANE_ADMIN_TOKEN, or the token `evoplane up` generates and prints.",
    auto_error=False,
)


def authorised(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
) -> ControlConfig:
    """The app's configuration, for a caller that sent the admin token (401 otherwise)."""
    config: ControlConfig = request.app.state.control
    token = credentials.credentials if credentials else ""
    if not secrets.compare_digest(token.encode(), config.admin_token.encode()):
        raise HTTPException(401, "Send `Authorization: Bearer <admin token>` (see `evoplane up`).")
    return config


def ui_link(config: ControlConfig, workflow_id: str) -> str | None:
    """The workflow's page in the Temporal UI, when the UI's address is known."""
    if not config.temporal_ui_url:
        return None
    return f"{config.temporal_ui_url}/namespaces/{config.namespace}/workflows/{workflow_id}"
