"""Who is calling, and whether they may use an agent: API keys and tenants' grants."""

from __future__ import annotations

from proxy.catalog import Catalog
from proxy.errors import GatewayError
from registry import ApiKeyIdentity, NotFoundError, get_agent

__all__ = ["AccessControl"]


class AccessControl:
    """API keys and agent grants, as the catalog caches them."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    async def authenticate(self, authorization: str | None) -> ApiKeyIdentity:
        """The identity of an `Authorization: Bearer <key>` header (401 if none or unknown)."""
        scheme, _, key = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise GatewayError(
                401,
                "Missing API key: send `Authorization: Bearer <key>` (create one with "
                "`evoplane key create --tenant NAME`).",
                code="missing_api_key",
            )
        identity = await self.catalog.identity(key.strip())
        if identity is None:
            raise GatewayError(401, "Invalid or revoked API key.", code="invalid_api_key")
        return identity

    async def authorize(self, identity: ApiKeyIdentity, agent: str) -> None:
        """404 for an agent that does not exist; 403 for one this key or tenant may not use."""
        granted = await self.catalog.agents_of(identity.tenant)
        if agent not in granted:
            # A refusal is checked against the registry itself: a cached grant list is served
            # while it refreshes, and an agent granted since must not be refused meanwhile.
            granted = await self.catalog.agents_of(identity.tenant, fresh=True)
        if agent not in granted:
            await self._refuse(identity, agent)
        if not identity.may_use(agent):
            raise GatewayError(
                403,
                f"This API key is limited to other agents than '{agent}'.",
                param="model",
                code="agent_not_allowed",
            )

    async def _refuse(self, identity: ApiKeyIdentity, agent: str) -> None:
        """Refuse an agent the tenant has no grant for: 404 if it does not exist, else 403."""
        try:
            await self.catalog.run(get_agent, agent)
        except NotFoundError:
            raise GatewayError(
                404, f"The agent '{agent}' does not exist.", param="model", code="model_not_found"
            ) from None
        raise GatewayError(
            403,
            f"Tenant '{identity.tenant}' may not use agent '{agent}'.",
            param="model",
            code="agent_not_allowed",
        )
