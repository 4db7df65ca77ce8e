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

__all__ = ["MemoryLoader", "ServedAnswer", "ServingPipeline", "UpstreamCall"]

MemoryLoader = Callable[[AgentVersion, Any], Awaitable[MemoryIndex]]


@dataclass
class ServedAnswer:
    """An answer served whole: as the agent sees it, the request as sent, and the upstream's."""

    restored: dict[str, Any]
    overlaid: Overlaid
    response: dict[str, Any]
    latency_ms: float


@dataclass
class UpstreamCall:
    """A request on its way upstream: as sent, when it was sent, and its answer to come.

    `answer` is the whole completion, or a stream's first chunk (`chunks` gives the rest);
    `sent` is set once the request is on the wire (or failed to leave).
    """

    overlaid: Overlaid
    started: float
    answer: asyncio.Future
    sent: asyncio.Event
    chunks: AsyncGenerator[dict] | None = None

    def elapsed_ms(self) -> float:
        return (time.perf_counter() - self.started) * 1000

    def drop(self) -> None:
        """Abandon the call: its answer, failure included, will not be used."""
        self.answer.cancel()
        self.answer.add_done_callback(lambda done: done.cancelled() or done.exception())

    async def abandon(self) -> None:
        """Drop the call, and close a stream's connection (its first chunk may be under way)."""
        self.drop()
        if self.chunks is not None:
            await asyncio.wait([self.answer])
            await self.chunks.aclose()


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

    async def complete(
        self, engine: UpstreamEngine, overlaid: Overlaid, sent: asyncio.Event | None = None
    ) -> dict[str, Any]:
        return await engine.complete(
            overlaid.body, model=overlaid.model, timeout=self.timeout, sent=sent
        )

    async def send(
        self,
        body: dict,
        version: AgentVersion,
        base_url: str | None,
        tenant: Any,
        *,
        harness: bool = True,
        stream: bool = False,
    ) -> UpstreamCall:
        """Overlay `body` for `version` and send it to the upstream at `base_url` (the
        route's replica); the answer is awaited from the call returned."""
        overlaid = await self.overlay(body, version, tenant, harness=harness)
        engine = self.engines.engine_for(version, base_url)
        sent = asyncio.Event()
        if stream:
            chunks = engine.stream(overlaid.body, model=overlaid.model, timeout=self.timeout)
            sent.set()  # nothing to wait for: a stream's route is settled at once
            return UpstreamCall(
                overlaid, time.perf_counter(), asyncio.ensure_future(anext(chunks)), sent, chunks
            )
        answer = asyncio.ensure_future(self.complete(engine, overlaid, sent))
        answer.add_done_callback(lambda _: sent.set())
        return UpstreamCall(overlaid, time.perf_counter(), answer, sent)

    @staticmethod
    def restore(response: dict[str, Any], overlaid: Overlaid) -> dict[str, Any]:
        """The answer in the agent's own names (tool schemas rewritten back)."""
        return restore_response(response, overlaid)

    async def serve(self, body: dict, version: AgentVersion, tenant: Any) -> ServedAnswer:
        """Every step at once, for a request whose answer nobody streams or waits on to
        capture (a shadow copy, a replay)."""
        call = await self.send(body, version, version.spec.model.base_url, tenant)
        response = await call.answer
        latency_ms = call.elapsed_ms()
        return ServedAnswer(
            self.restore(response, call.overlaid), call.overlaid, response, latency_ms
        )
