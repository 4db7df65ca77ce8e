"""Which version serves a request: sticky per session, canary and holdback by a stable hash.

A new session is placed once: its hash bucket in [0, 1) against the canary and holdback
weights at that moment decides canary (the bottom of the range), holdback (the top) or
stable (the rest), and a second, independent hash picks its upstream
replica. The choice is stored (registry `session_route`), so the session keeps both for its
life on every gateway replica, whatever happens to the weights later. Two gateways that
place one session at the same moment, with different weights in their caches, settle on
the first placement written: the other gateway adopts it once its own write is refused.

The registry read that tells a new session from one placed before (by another gateway, or
before this one restarted) is the slowest step of a session's first request, and almost
always confirms the hash's proposal. So it runs while the request is served on the proposal,
speculatively: the gateway checks `Router.settle` once the request is on the wire and, in the
rare case the registry holds another placement, drops that upstream call and serves the
session as placed. Nothing is captured or answered before the route is settled.

The registry cannot always settle it in time: PostgreSQL may be down (the read fails at once)
or not answering (a partition, a paused server: the read hangs). The hot path waits for it at
most `deadline` seconds from routing, and not at all while a read has been out longer than
that; then the proposal is the placement, settled without the registry. That is safe because
the proposal is a stable hash: every gateway, and this one after a restart, proposes the same.
Its record goes through the capture spool like any other and is written once the registry is
back; should another placement have been written first (weights differed, or it was placed
before the outage), that one wins and this gateway adopts it for the session's later requests.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from atdp import utcnow
from proxy.catalog import Catalog
from registry import (
    AgentVersion,
    Alias,
    AliasState,
    SessionRoute,
    is_unreachable,
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
    # A new session's placement being settled (the registry read): see `Router.settle`.
    placing: asyncio.Future[SessionRoute] | None = field(default=None, compare=False)

    @property
    def base_url(self) -> str | None:
        urls = [
            u for u in [self.version.spec.model.base_url, *self.version.spec.model.replicas] if u
        ]
        return urls[self.replica % len(urls)] if urls else None


def propose(aliases: AliasState, agent: str, session_id: str) -> tuple[str, Alias]:
    bucket = session_bucket(agent, session_id)
    if aliases.canary and bucket < aliases.canary_weight:
        return aliases.canary, Alias.CANARY
    if aliases.holdback and bucket >= 1.0 - aliases.holdback_weight:
        return aliases.holdback, Alias.HOLDBACK
    if aliases.stable is None:
        raise LookupError(f"agent {agent} has no stable version")
    return aliases.stable, Alias.STABLE


class Router:
    """Resolves (tenant, agent, session) to a Route, remembering recent sessions.

    A session this gateway has not seen costs one registry read (has another gateway, or an
    earlier run, placed it?), done while the proposed route serves (see the module's
    docstring); the reads of sessions that start together share one query round. Placing a
    new session is written by `record` (the gateway hands it to the capture spool, so the
    write is off the request path and survives a crash). Should that write find the session
    placed already, `adopt` makes the placement in force this gateway's.

    Args:
        record: persists a new session's placement; called on the event loop, must not block.
        deadline: seconds a new session's placement waits for the registry's read before
            the proposal stands (see the module's docstring).
    """

    def __init__(
        self,
        catalog: Catalog,
        record: Callable[[SessionRoute], None],
        *,
        deadline: float = 0.5,
        max_sessions: int = 100_000,
    ) -> None:
        self.catalog = catalog
        self._record = record
        self.deadline = deadline
        self._routes: OrderedDict[tuple[str, str, str], SessionRoute] = OrderedDict()
        self._max_sessions = max_sessions
        self._placing: dict[tuple[str, str, str], tuple[SessionRoute, asyncio.Task]] = {}
        self._lookups: dict[tuple[str, str, str], asyncio.Future] = {}
        self._looking_up: asyncio.Task | None = None
        self._round_started: float | None = None  # when the registry read in flight began

    def adopt(self, route: SessionRoute) -> None:
        """Serve a session as the registry has it placed (another gateway placed it first)."""
        self._remember((route.agent, route.tenant, route.session), route)

    def _remember(self, key: tuple[str, str, str], route: SessionRoute) -> None:
        self._routes[key] = route
        self._routes.move_to_end(key)
        if len(self._routes) > self._max_sessions:
            self._routes.popitem(last=False)

    async def _recorded_route(
        self, agent: str, tenant: str, session_id: str
    ) -> SessionRoute | None:
        """The registry's route for a session, read together with other sessions' reads."""
        key = (agent, tenant, session_id)
        future = self._lookups.get(key)
        if future is None:
            future = self._lookups[key] = asyncio.get_running_loop().create_future()
            if self._looking_up is None:
                self._looking_up = asyncio.create_task(self._look_up())
        return await asyncio.shield(future)

    async def _look_up(self) -> None:
        try:
            while self._lookups:
                await asyncio.sleep(0)  # let the sessions starting in this tick join
                batch, self._lookups = self._lookups, {}
                self._round_started = time.monotonic()
                try:
                    routes = await self.catalog.session_routes(list(batch))
                except Exception as error:  # noqa: BLE001 - each waiting request gets it
                    for future in batch.values():
                        future.set_exception(error)
                        future.exception()  # retrieved: a request may have stopped waiting
                    continue
                finally:
                    self._round_started = None
                for future, route in zip(batch.values(), routes, strict=True):
                    future.set_result(route)
        finally:
            self._looking_up = None

    async def route(
        self, tenant: str, agent: str, session_id: str, *, minted: bool = False
    ) -> Route:
        """The session's route; for a session not settled yet, its proposed placement, with
        `placing` set: pass it to `settle` before capturing or answering anything.

        `minted`: this gateway made the session id up just now (the request named none), so
        no one can have placed it: placed on the hash's proposal without a registry read."""
        key = (agent, tenant, session_id)
        placing = None
        known = self._routes.get(key)
        if known is not None:
            self._routes.move_to_end(key)
        elif key in self._placing:  # a request of the same session is settling it already
            known, placing = self._placing[key]
        elif minted:
            known = self._placed_here(key, await self._propose(tenant, agent, session_id))
        else:
            known = await self._propose(tenant, agent, session_id)
            placing = asyncio.create_task(self._place(key, known))
            placing.add_done_callback(_retrieve)
            self._placing[key] = (known, placing)
        aliases = await self.catalog.aliases(agent)
        version = await self.catalog.version(known.version_id)
        shadow = await self.catalog.version(aliases.shadow) if aliases.shadow else None
        return Route(
            version=version,
            alias=Alias(known.alias),
            replica=known.replica,
            shadow=shadow,
            placing=placing,
        )

    async def settle(self, route: Route) -> Route:
        """`route` if it holds, else the session's route as the registry has it placed
        (serve the request again on that one). Raises what the registry read raised."""
        if route.placing is None:
            return route
        placed = await asyncio.shield(route.placing)
        if (placed.version_id, placed.alias, placed.replica) == (
            route.version.id,
            route.alias,
            route.replica,
        ):
            return route
        return await self.route(placed.tenant, placed.agent, placed.session)

    async def _propose(self, tenant: str, agent: str, session_id: str) -> SessionRoute:
        """Where the hash places a new session under the weights in force now."""
        aliases = await self.catalog.aliases(agent)
        version_id, alias = propose(aliases, agent, session_id)
        version = await self.catalog.version(version_id)
        replicas = 1 + len(version.spec.model.replicas)
        return SessionRoute(
            agent=agent,
            session=session_id,
            tenant=tenant,
            version_id=version_id,
            alias=alias.value,
            replica=int(session_bucket(agent, session_id, "replica") * replicas),
            created_at=utcnow(),
        )

    async def _place(self, key: tuple[str, str, str], proposal: SessionRoute) -> SessionRoute:
        """The session's placement: the registry's if it has one, else the proposal."""
        try:
            placed = await self._registry_placement(key)
            if placed is None:  # the hash makes every gateway choose alike
                return self._placed_here(key, proposal)
            self._remember(key, placed)
            return placed
        finally:
            self._placing.pop(key, None)

    async def _registry_placement(self, key: tuple[str, str, str]) -> SessionRoute | None:
        """The registry's placement of a session; None where it has none, or cannot say
        within `deadline` (unreachable, or not answering: then the proposal stands, and is
        reconciled when the registry is back)."""
        if self._overdue():
            return None  # a read hangs already: do not queue behind it
        try:
            return await asyncio.wait_for(self._recorded_route(*key), self.deadline)
        except TimeoutError:
            return None
        except Exception as error:
            if not is_unreachable(error):
                raise
            return None

    def _overdue(self) -> bool:
        """Whether the registry read in flight has been out longer than `deadline`."""
        started = self._round_started
        return started is not None and time.monotonic() - started > self.deadline

    def _placed_here(self, key: tuple[str, str, str], proposal: SessionRoute) -> SessionRoute:
        """Place a session no one has placed on `proposal`: remembered now, recorded in the
        background (the commit is the slowest step of all)."""
        self._record(proposal)
        self._remember(key, proposal)
        return proposal

    async def drain(self) -> None:
        """Wait for registry reads in flight (shutdown, tests)."""
        pending = [task for _, task in self._placing.values()]
        if self._looking_up is not None:
            pending.append(self._looking_up)
        await asyncio.gather(*pending, return_exceptions=True)


def _retrieve(task: asyncio.Task) -> None:
    """Mark a placement's failure seen: its request may have ended before settling it."""
    if not task.cancelled():
        task.exception()
