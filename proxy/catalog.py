"""Cached registry reads for the gateway's hot path.

Versions are immutable, so they are cached for good; aliases, keys and grants change
rarely and are cached for a few seconds, so a promotion or a revoked key takes effect
within `ttl` without a database round trip per request. On PostgreSQL the registry
announces each such change and the gateway drops the entry at once (`changed`), so the TTL
only bounds what an announcement missed.

While the registry is unreachable, or does not answer, what is cached keeps serving, however
old. A request that needs what is not cached waits at most `timeout` for it, then fails
with `RegistryUnreachable` (a 503 that says so), rather than for as long as the outage.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlmodel import Session

from registry import (
    AgentVersion,
    AliasState,
    ApiKeyIdentity,
    Change,
    McpServer,
    NotFoundError,
    SessionRoute,
    SessionRouteReader,
    TenantPolicy,
    authenticate,
    current_aliases,
    get_mcp_server,
    get_memory_items,
    get_session_route,
    get_tenant,
    get_version,
    is_unreachable,
    tenant_agents,
    transaction,
)
from runtime.version.memory import MemoryIndex

__all__ = ["Catalog", "RegistryUnreachable", "version_memory"]

log = logging.getLogger(__name__)


class RegistryUnreachable(RuntimeError):
    """The registry cannot be reached and nothing cached can stand in."""


T = TypeVar("T")


class Catalog:
    """The registry as the gateway sees it: cached, and read off the event loop."""

    def __init__(self, engine: Engine, *, ttl: float = 2.0, timeout: float = 5.0) -> None:
        self.engine = engine
        self._readonly = engine.execution_options(isolation_level="AUTOCOMMIT")
        self.ttl = ttl
        self.timeout = timeout
        self._expiring: dict[tuple, tuple[float, Any]] = {}
        self._versions: dict[str, AgentVersion] = {}
        self._memory: dict[tuple[str, str], MemoryIndex] = {}
        self._refreshing: set[tuple] = set()
        self._tasks: set[asyncio.Task] = set()
        self._routes = SessionRouteReader.for_engine(engine, timeout=timeout)

    async def aclose(self) -> None:
        if self._routes is not None:
            await self._routes.aclose()

    async def run(self, work: Callable[..., T], *args: Any) -> T:
        """Run a registry function in a fresh transaction, in a worker thread."""

        def call() -> T:
            with transaction(self.engine) as session:
                return work(session, *args)

        return await asyncio.to_thread(call)

    async def read(self, work: Callable[..., T], *args: Any) -> T:
        """Run a registry function that only reads, in a worker thread, without a transaction
        of its own (autocommit): one round trip per query instead of three, which a new
        session's first request waits for."""

        def call() -> T:
            with self._readonly.connect() as connection, Session(bind=connection) as session:
                return work(session, *args)

        return await asyncio.to_thread(call)

    async def session_routes(self, keys: list[tuple[str, str, str]]) -> list[SessionRoute | None]:
        """The registry's placements of sessions by (agent, tenant, session), None for a
        session never placed. Never cached: another gateway may have placed it just now.

        On PostgreSQL one query on the event loop's own connection; on SQLite a read per
        session in a worker thread."""
        if self._routes is not None:
            return await self._routes.read(keys)
        return await self.read(lambda session: [get_session_route(session, *key) for key in keys])

    async def _cached(self, key: tuple, load: Callable[[], Any]) -> Any:
        """A cached value, refreshed in the background once older than `ttl`.

        Only the first look-up of a key waits for the registry; after that a request is
        served from the cache while a refresh runs (so a promotion or a revoked key takes
        effect within `ttl` plus one round trip). When the registry is unreachable the last
        value known is served, however old: capture meanwhile waits in the spool.
        """
        hit = self._expiring.get(key)
        if hit is not None:
            if hit[0] <= time.monotonic() and key not in self._refreshing:
                self._refreshing.add(key)
                task = asyncio.create_task(self._refresh(key, load))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            return hit[1]
        value = await self._needed(load())
        self._expiring[key] = (time.monotonic() + self.ttl, value)
        return value

    async def _needed(self, read: Awaitable[T]) -> T:
        """A read a request cannot do without (nothing cached stands in), bounded by
        `timeout`: RegistryUnreachable when the registry cannot be reached or does not
        answer. (A read that hangs goes on in its thread; its request stops waiting.)"""
        try:
            return await asyncio.wait_for(read, self.timeout)
        except TimeoutError:
            raise RegistryUnreachable(f"no answer in {self.timeout:g} s") from None
        except Exception as error:
            if not is_unreachable(error):
                raise
            raise RegistryUnreachable(str(error)) from error

    async def _refresh(self, key: tuple, load: Callable[[], Any]) -> None:
        try:
            self._expiring[key] = (time.monotonic() + self.ttl, await load())
        except Exception as error:  # noqa: BLE001 - the stale value keeps serving
            if is_unreachable(error):
                log.warning("registry unreachable; serving a stale %s", key[0])
            else:
                log.exception("refreshing %s failed; serving the cached value", key[0])
        finally:
            self._refreshing.discard(key)

    async def identity(self, api_key: str) -> ApiKeyIdentity | None:
        return await self._cached(("key", api_key), lambda: self.read(authenticate, api_key))

    async def agents_of(self, tenant: str, *, fresh: bool = False) -> list[str]:
        """The agents `tenant` may use; `fresh` reads the registry now (and caches that)."""
        key = (Change.GRANTS.value, tenant)
        if fresh:
            self._expiring.pop(key, None)
        return await self._cached(key, lambda: self.read(tenant_agents, tenant))

    async def policy(self, tenant: str) -> TenantPolicy:
        async def load() -> TenantPolicy:
            return (await self.read(get_tenant, tenant)).policy

        return await self._cached((Change.POLICY.value, tenant), load)

    async def mcp_server(self, name: str) -> McpServer | None:
        """The registered upstream MCP server called `name`, or None."""

        def load(session: Session) -> McpServer | None:
            try:
                return get_mcp_server(session, name)
            except NotFoundError:
                return None

        return await self._cached(("mcp_server", name), lambda: self.read(load))

    async def aliases(self, agent: str) -> AliasState:
        return await self._cached(("aliases", agent), lambda: self.read(current_aliases, agent))

    async def version(self, version_id: str) -> AgentVersion:
        found = self._versions.get(version_id)
        if found is None:
            found = await self._needed(self.read(get_version, version_id))
            self._versions[version_id] = found
        return found

    async def memory_index(self, version: AgentVersion, tenant: str) -> MemoryIndex:
        """The BM25 index over the version's memory snapshot, as visible to `tenant`."""
        key = (version.id, tenant)
        index = self._memory.get(key)
        if index is None:
            if version.spec.memory.item_ids:
                index = await self._needed(self.read(version_memory, version, tenant))
            else:  # no registry read for a version without memory
                index = MemoryIndex([])
            self._memory[key] = index
        return index

    def forget(self) -> None:
        """Drop every expiring entry (tests and admin actions that must apply at once)."""
        self._expiring.clear()

    def expire(self) -> None:
        """Mark every expiring entry due for a refresh, keeping its value: what to do when
        change announcements may have been missed (listening restarted). The next look-up
        of each refreshes it while the value known serves, as at the end of its `ttl`; so a
        registry that goes down again at once still finds every value to serve stale."""
        for key, (_, value) in list(self._expiring.items()):
            self._expiring[key] = (0.0, value)

    def changed(self, change: tuple[Change, str] | None) -> None:
        """Drop what an announced registry change made stale (`registry.changes`); an
        announcement this gateway does not understand drops everything."""
        if change is None:
            self.forget()
            return
        kind, name = change
        if kind is Change.KEYS:  # cached by the secret, which announcements never carry
            for key in [key for key in self._expiring if key[0] == "key"]:
                del self._expiring[key]
        else:
            self._expiring.pop((kind.value, name), None)


def version_memory(session: Session, version: AgentVersion, tenant: str | None) -> MemoryIndex:
    """The BM25 index over a version's memory snapshot, as visible to `tenant` (no tenant,
    as for the safety suite: no memory)."""
    ids = [uuid.UUID(item_id) for item_id in version.spec.memory.item_ids]
    if tenant is None or not ids:
        return MemoryIndex([])
    return MemoryIndex(get_memory_items(session, version.agent, tenant, ids))
