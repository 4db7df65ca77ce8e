"""Tenant scope of a read: one tenant, or every tenant, said out loud.

Tenant-facing paths pass a tenant name; only the control plane's analyses pass
`ALL_TENANTS`. There is no default, so forgetting the scope is a type error, not a leak.
"""

from __future__ import annotations

import enum
from typing import Any, TypeAlias

__all__ = ["ALL_TENANTS", "TenantScope", "scoped"]


class _AllTenants(enum.Enum):
    ALL = "all tenants"


ALL_TENANTS = _AllTenants.ALL
TenantScope: TypeAlias = str | _AllTenants


def scoped(statement: Any, column: Any, tenant: TenantScope) -> Any:
    """Add `column == tenant` to a select, unless the scope is every tenant."""
    if tenant is ALL_TENANTS:
        return statement
    if not isinstance(tenant, str) or not tenant:
        raise TypeError(f"tenant scope must be a tenant name or ALL_TENANTS, not {tenant!r}")
    return statement.where(column == tenant)
