"""The one serving pipeline: a request served for a version, as the gateway, its shadow copy
and the replay gate all serve it.

A step of serving (an overlay, memory retrieval, the upstream call, restoring the answer to
the agent's own names) is added here, once, and every caller has it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from atdp import Harness
from proxy.engines.base import UpstreamEngine
from proxy.engines.pool import EnginePool
from registry import AgentVersion
from runtime.version.memory import MemoryIndex
from runtime.version.overlays import Overlaid, apply_overlays, restore_response

__all__ = ["MemoryLoader", "ServedAnswer", "ServingPipeline"]

MemoryLoader = Callable[[AgentVersion, Any], Awaitable[MemoryIndex]]


@dataclass
class ServedAnswer:
    """An answer served whole: as the agent sees it, the request as sent, and the upstream's."""

    restored: dict[str, Any]
    overlaid: Overlaid
    response: dict[str, Any]
    latency_ms: float


class ServingPipeline:
    """Overlay (with the version's memory), call the upstream, restore the answer.

    Upstream failures are raised as the engines raise them (`UpstreamError`,
    `UpstreamTimeout`): the gateway turns them into its clients' errors, the replay gate
    lets its activity retry.
    """

    def __init__(self, engines: EnginePool, memory: MemoryLoader, timeout: float) -> None:
        self.engines = engines
        self.memory = memory
        self.timeout = timeout

    async def overlay(
        self, body: dict, version: AgentVersion, tenant: Any, *, harness: bool = True
    ) -> Overlaid:
        """The request with the version applied (all but the harness when `harness` is
        false: an optimiser brings its own)."""
        memory = await self.memory(version, tenant)
        spec = version.spec if harness else version.spec.model_copy(update={"harness": Harness()})
        return apply_overlays(body, spec, memory, tenant=tenant)

    def engine(self, version: AgentVersion, base_url: str | None) -> UpstreamEngine:
        """The upstream that serves `version` at `base_url` (its route's replica)."""
        return self.engines.engine_for(version, base_url)

    async def complete(
        self, engine: UpstreamEngine, overlaid: Overlaid, sent: asyncio.Event | None = None
    ) -> dict[str, Any]:
        return await engine.complete(
            overlaid.body, model=overlaid.model, timeout=self.timeout, sent=sent
        )

    def stream(self, engine: UpstreamEngine, overlaid: Overlaid) -> AsyncGenerator[dict]:
        return engine.stream(overlaid.body, model=overlaid.model, timeout=self.timeout)

    @staticmethod
    def restore(response: dict[str, Any], overlaid: Overlaid) -> dict[str, Any]:
        """The answer in the agent's own names (tool schemas rewritten back)."""
        return restore_response(response, overlaid)

    async def serve(self, body: dict, version: AgentVersion, tenant: Any) -> ServedAnswer:
        """Every step at once, for a request whose answer nobody streams or waits on to
        capture (a shadow copy, a replay)."""
        overlaid = await self.overlay(body, version, tenant)
        started = time.perf_counter()
        response = await self.complete(self.engine(version, version.spec.model.base_url), overlaid)
        latency_ms = (time.perf_counter() - started) * 1000
        return ServedAnswer(self.restore(response, overlaid), overlaid, response, latency_ms)
