"""Which version serves a request: sticky per session, canary by a stable hash.

A new session is placed once: its hash bucket in [0, 1) against the canary weight at that
moment decides canary or stable, and a second, independent hash picks its upstream
replica. The choice is stored (registry `session_route`), so the session keeps both for its
life on every gateway replica, whatever happens to the weights later.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from atdp import utcnow
from proxy.catalog import Catalog
from registry import (
    AgentVersion,
    Alias,
    AliasState,
    SessionRoute,
    get_session_route,
    is_unreachable,
    route_session,
)

__all__ = ["Route", "Router", "session_bucket"]


def session_bucket(agent: str, session_id: str, salt: str = "version") -> float:
    """A uniform, stable number in [0, 1) for a session (same input, same bucket, anywhere)."""
    digest = hashlib.sha256(f"{salt}\x1f{agent}\x1f{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class Route:
    version: AgentVersion
    alias: Alias | None  # None: pinned by an evaluation request, not routed
    replica: int
    shadow: AgentVersion | None

    @property
    def base_url(self) -> str | None:
        urls = [
            u for u in [self.version.spec.model.base_url, *self.version.spec.model.replicas] if u
        ]
        return urls[self.replica % len(urls)] if urls else None


def propose(aliases: AliasState, agent: str, session_id: str) -> tuple[str, Alias]:
    if aliases.canary and session_bucket(agent, session_id) < aliases.canary_weight:
        return aliases.canary, Alias.CANARY
    if aliases.stable is None:
        raise LookupError(f"agent {agent} has no stable version")
    return aliases.stable, Alias.STABLE


class Router:
    """Resolves (tenant, agent, session) to a Route, remembering recent sessions."""

    def __init__(self, catalog: Catalog, *, max_sessions: int = 100_000) -> None:
        self.catalog = catalog
        self._routes: OrderedDict[tuple[str, str, str], SessionRoute] = OrderedDict()
        self._max_sessions = max_sessions
        self._unrecorded: list[SessionRoute] = []
        self._background: set[asyncio.Task] = set()

    async def _record(self, proposal: SessionRoute) -> None:
        """Persist a new session's route off the request path (and any left from an outage)."""
        for pending in [*self._unrecorded, proposal]:
            try:
                recorded = await self.catalog.run(route_session, pending)
            except Exception as error:
                if not is_unreachable(error):
                    raise
                if pending is proposal:
                    self._unrecorded.append(proposal)
                return
            if pending is not proposal:
                self._unrecorded.remove(pending)
            # Another gateway may have placed this session first: its choice wins.
            self._routes[(recorded.agent, recorded.tenant, recorded.session)] = recorded

    async def route(self, tenant: str, agent: str, session_id: str) -> Route:
        known = await self._session_route(tenant, agent, session_id)
        aliases = await self.catalog.aliases(agent)
        version = await self.catalog.version(known.version_id)
        shadow = await self.catalog.version(aliases.shadow) if aliases.shadow else None
        return Route(
            version=version, alias=Alias(known.alias), replica=known.replica, shadow=shadow
        )

    async def _session_route(self, tenant: str, agent: str, session_id: str) -> SessionRoute:
        key = (agent, tenant, session_id)
        cached = self._routes.get(key)
        if cached is not None:
            self._routes.move_to_end(key)
            return cached
        aliases = await self.catalog.aliases(agent)
        version_id, alias = propose(aliases, agent, session_id)
        version = await self.catalog.version(version_id)
        replicas = 1 + len(version.spec.model.replicas)
        proposal = SessionRoute(
            agent=agent,
            session=session_id,
            tenant=tenant,
            version_id=version_id,
            alias=alias.value,
            replica=int(session_bucket(agent, session_id, "replica") * replicas),
            created_at=utcnow(),
        )
        try:
            route = await self.catalog.run(get_session_route, agent, tenant, session_id)
        except Exception as error:
            if not is_unreachable(error):
                raise
            route = None  # registry down: place it here; it is recorded once the registry is back
        if route is None:
            # New session: serve it now, record the choice in the background (the commit is
            # the slowest step of a first request). The hash makes every gateway choose alike.
            route = proposal
            task = asyncio.create_task(self._record(proposal))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        self._routes[key] = route
        if len(self._routes) > self._max_sessions:
            self._routes.popitem(last=False)
        return route

    async def drain(self) -> None:
        """Wait for routes still being recorded (shutdown, tests)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
