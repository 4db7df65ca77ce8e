"""Tenants, their policies, their API keys (stored hashed), and the agents they may use."""

from __future__ import annotations

import hashlib
import re
import secrets
import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from sqlmodel import Session, select

from atdp import Consent, TrainingEligibility, new_id, utcnow
from registry.changes import Change, announce
from registry.errors import AlreadyExistsError, InvalidRecordError, NotFoundError
from registry.tables import AgentRow, ApiKeyRow, TenantAgentRow, TenantPolicyChangeRow, TenantRow

__all__ = [
    "ApiKeyIdentity",
    "IssuedApiKey",
    "Tenant",
    "TenantPolicy",
    "TenantPolicyChange",
    "agent_tenants",
    "authenticate",
    "create_api_key",
    "create_tenant",
    "get_tenant",
    "grant_agent",
    "hash_api_key",
    "list_tenants",
    "revoke_api_key",
    "tenant_agents",
    "tenant_policy_history",
    "update_tenant_policy",
    "validate_slug",
]

KEY_PREFIX = "evp_"
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")


def validate_slug(kind: str, name: str) -> str:
    if not _SLUG.match(name):
        raise InvalidRecordError(
            f"{kind} name {name!r} is not valid: use 1-64 lowercase letters, digits, "
            "'.', '_' or '-', starting with a letter or digit"
        )
    return name


class TenantPolicy(BaseModel):
    """What a tenant allows done with its data."""

    training: TrainingEligibility = TrainingEligibility.ELIGIBLE
    consent: Consent = Consent.CONTRACT
    retention_days: int | None = Field(default=None, ge=1)
    redaction_patterns: list[str] = Field(default_factory=list)
    seal_raw: bool = Field(
        default=False,
        description="Keep an encrypted raw copy of each redacted event (needs a seal key).",
    )
    sealed_readers: list[str] = Field(
        default_factory=list, description="Training jobs allowed to read sealed raw copies."
    )


class TenantPolicyChange(BaseModel):
    """One change of a tenant's policy: the policy after it, the fields it changed
    ({field: {"from", "to"}}), who, why and when."""

    tenant: str
    policy: TenantPolicy
    changed: dict[str, dict[str, Any]]
    actor: str
    reason: str
    at: datetime


class Tenant(BaseModel):
    name: str
    policy: TenantPolicy
    created_at: datetime


class IssuedApiKey(BaseModel):
    """A new key: `key` is shown once and never stored; only its hash is."""

    id: uuid.UUID
    tenant: str
    key: str
    prefix: str
    agents: list[str] | None


class ApiKeyIdentity(BaseModel):
    """Who a presented key belongs to."""

    key_id: uuid.UUID
    tenant: str
    agents: list[str] | None  # None: every agent granted to the tenant

    def may_use(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents


def _tenant(row: TenantRow) -> Tenant:
    return Tenant(
        name=row.name, policy=TenantPolicy.model_validate(row.policy), created_at=row.created_at
    )


def create_tenant(session: Session, name: str, policy: TenantPolicy | None = None) -> Tenant:
    validate_slug("tenant", name)
    if session.get(TenantRow, name) is not None:
        raise AlreadyExistsError("tenant", name)
    row = TenantRow(
        name=name, policy=(policy or TenantPolicy()).model_dump(mode="json"), created_at=utcnow()
    )
    session.add(row)
    session.flush()
    return _tenant(row)


def get_tenant(session: Session, name: str) -> Tenant:
    row = session.get(TenantRow, name)
    if row is None:
        raise NotFoundError("tenant", name)
    return _tenant(row)


def _valid_policy(fields: dict[str, Any]) -> TenantPolicy:
    """The policy `fields` describe, or an error that says which field is wrong and how."""
    unknown = set(fields) - set(TenantPolicy.model_fields)
    if unknown:
        raise InvalidRecordError(
            f"a tenant policy has no {', '.join(sorted(unknown))}; its fields are "
            f"{', '.join(TenantPolicy.model_fields)}"
        )
    try:
        policy = TenantPolicy.model_validate(fields)
    except ValidationError as error:
        raise InvalidRecordError(f"not a valid tenant policy: {error}") from None
    for pattern in policy.redaction_patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise InvalidRecordError(
                f"redaction pattern {pattern!r} is not a regular expression: {error}"
            ) from None
    if policy.sealed_readers and not policy.seal_raw:
        raise InvalidRecordError(
            "readers of sealed raw copies need seal_raw (without it no raw copy is kept)"
        )
    return policy


def update_tenant_policy(
    session: Session, name: str, changes: dict[str, Any], *, actor: str, reason: str = ""
) -> TenantPolicyChange | None:
    """Change some fields of a tenant's policy (the rest stay), recorded with who, why and
    when, and announced to the gateways; None when nothing would change.

    What the gateway stamps on each event (training eligibility, retention, redaction)
    applies to traffic captured from then on; sealed readers are checked at every read."""
    row = session.get(TenantRow, name)
    if row is None:
        raise NotFoundError("tenant", name)
    before = TenantPolicy.model_validate(row.policy).model_dump(mode="json")
    after = _valid_policy({**before, **changes}).model_dump(mode="json")
    changed = {
        field: {"from": before[field], "to": after[field]}
        for field in after
        if before[field] != after[field]
    }
    if not changed:
        return None
    row.policy = after
    change = TenantPolicyChangeRow(
        tenant=name, policy=after, changed=changed, actor=actor, reason=reason, at=utcnow()
    )
    session.add_all([row, change])
    session.flush()
    announce(session, Change.POLICY, name)
    return _change(change)


def _change(row: TenantPolicyChangeRow) -> TenantPolicyChange:
    return TenantPolicyChange.model_validate(row, from_attributes=True)


def tenant_policy_history(session: Session, name: str) -> list[TenantPolicyChange]:
    """Every change of the tenant's policy, oldest first."""
    get_tenant(session, name)
    statement = (
        select(TenantPolicyChangeRow)
        .where(TenantPolicyChangeRow.tenant == name)
        .order_by(TenantPolicyChangeRow.at, TenantPolicyChangeRow.id)
    )
    return [_change(row) for row in session.exec(statement)]


def list_tenants(session: Session) -> list[Tenant]:
    return [_tenant(row) for row in session.exec(select(TenantRow).order_by(TenantRow.name))]


def hash_api_key(key: str) -> str:
    """SHA-256 hex of a key. Keys carry 256 random bits, so a slow hash adds nothing."""
    return hashlib.sha256(key.encode()).hexdigest()


def create_api_key(session: Session, tenant: str, agents: list[str] | None = None) -> IssuedApiKey:
    get_tenant(session, tenant)
    for agent in agents or []:
        if session.get(AgentRow, agent) is None:
            raise NotFoundError("agent", agent)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKeyRow(
        id=new_id(),
        tenant=tenant,
        key_hash=hash_api_key(key),
        prefix=key[: len(KEY_PREFIX) + 6],
        agents=sorted(agents) if agents is not None else None,
        created_at=utcnow(),
    )
    session.add(row)
    session.flush()
    return IssuedApiKey(id=row.id, tenant=tenant, key=key, prefix=row.prefix, agents=row.agents)


def authenticate(session: Session, key: str) -> ApiKeyIdentity | None:
    """The identity behind a presented key, or None for an unknown or revoked key."""
    row = session.exec(select(ApiKeyRow).where(ApiKeyRow.key_hash == hash_api_key(key))).first()
    if row is None or row.revoked_at is not None:
        return None
    return ApiKeyIdentity(key_id=row.id, tenant=row.tenant, agents=row.agents)


def revoke_api_key(session: Session, key_id: uuid.UUID) -> None:
    row = session.get(ApiKeyRow, key_id)
    if row is None:
        raise NotFoundError("api key", key_id)
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        session.add(row)
        session.flush()
        announce(session, Change.KEYS, str(key_id))


def grant_agent(session: Session, tenant: str, agent: str) -> None:
    """Allow `tenant` to use `agent`; granting twice is a no-op."""
    get_tenant(session, tenant)
    if session.get(AgentRow, agent) is None:
        raise NotFoundError("agent", agent)
    if session.get(TenantAgentRow, (tenant, agent)) is None:
        session.add(TenantAgentRow(tenant=tenant, agent=agent, created_at=utcnow()))
        session.flush()
        announce(session, Change.GRANTS, tenant)


def tenant_agents(session: Session, tenant: str) -> list[str]:
    statement = select(TenantAgentRow.agent).where(TenantAgentRow.tenant == tenant)
    return sorted(session.exec(statement))


def agent_tenants(session: Session, agent: str) -> list[str]:
    """The tenants granted `agent`, by name."""
    statement = select(TenantAgentRow.tenant).where(TenantAgentRow.agent == agent)
    return sorted(session.exec(statement))
