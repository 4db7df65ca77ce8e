"""/api/tenants: a tenant's data policy, changed after its creation, and who changed it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from evoplane.control.config import ControlConfig, authorised
from registry import get_tenant, tenant_policy_history, transaction, update_tenant_policy

__all__ = ["PolicyUpdate", "router"]

router = APIRouter(prefix="/api/tenants", tags=["tenants"])


class PolicyUpdate(BaseModel):
    """The policy fields to change (the rest stay), with who and why."""

    model_config = ConfigDict(extra="forbid")

    policy: dict[str, Any] = Field(
        description="Any of: training, consent, retention_days, redaction_patterns, seal_raw, "
        "sealed_readers.",
        examples=[{"retention_days": 30, "training": "debug_only"}],
    )
    actor: str = Field(min_length=1)
    reason: str = ""


@router.get("/{tenant}")
async def tenant(tenant: str, c: ControlConfig = Depends(authorised)) -> dict[str, Any]:
    """A tenant's policy and every change made to it, oldest first."""
    with transaction(c.engine) as session:
        found = get_tenant(session, tenant)
        history = tenant_policy_history(session, tenant)
    return {
        **found.model_dump(mode="json"),
        "history": [change.model_dump(mode="json") for change in history],
    }


@router.patch("/{tenant}")
async def update_policy(
    tenant: str, body: PolicyUpdate, c: ControlConfig = Depends(authorised)
) -> dict[str, Any]:
    """Change some fields of a tenant's policy; recorded, and announced to the gateways."""
    with transaction(c.engine) as session:
        change = update_tenant_policy(
            session, tenant, body.policy, actor=body.actor, reason=body.reason
        )
        policy = get_tenant(session, tenant).policy
    return {
        "tenant": tenant,
        "changed": change.changed if change else {},
        "policy": policy.model_dump(mode="json"),
        "at": change.at.isoformat() if change else None,
    }
