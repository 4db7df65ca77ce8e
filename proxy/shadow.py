"""Shadow copies: a user's request served again, in the background, to the version its
route shadows, and recorded as shadow traffic. A copy never affects the user's answer: it
starts after that answer is captured, and its failures are only counted and logged."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace

from atdp import Traffic
from proxy.admission import Admitted
from proxy.capture.recorder import Recorder
from proxy.pipeline import ServingPipeline
from proxy.router import Route
from registry import AgentVersion

__all__ = ["Shadows"]

log = logging.getLogger(__name__)


class Shadows:
    """The shadow copies under way in one gateway process."""

    def __init__(self, pipeline: ServingPipeline, recorder: Recorder) -> None:
        self.pipeline, self.recorder = pipeline, recorder
        self.failures = 0  # copies that failed, since the process started
        self._tasks: set[asyncio.Task] = set()

    def copy(self, admitted: Admitted, body: dict, route: Route) -> None:
        """Copy a user's request to the route's shadow version, if it has one. Evaluation
        traffic (replays, optimisers) is never shadowed."""
        if route.shadow is None or admitted.traffic is not Traffic.USER:
            return
        task = asyncio.create_task(self.serve(admitted, body, route.shadow))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve(self, admitted: Admitted, body: dict, version: AgentVersion) -> None:
        """Serve a copy to `version` and record it; a failure is logged, never raised."""
        try:
            served = await self.pipeline.serve(body, version, admitted.identity.tenant)
            shadowed = replace(admitted, traffic=Traffic.SHADOW)
            await self.recorder.record_exchange(
                shadowed, body, served.overlaid, version, served.response, served.latency_ms
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - a shadow failure is logged, never raised
            self.failures += 1
            log.warning("shadow request to %s failed: %s", version.id, error)

    async def aclose(self) -> None:
        """Cancel the copies still under way."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
