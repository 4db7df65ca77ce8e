"""One gateway process: its long-lived parts, wired, started and closed.

`Gateway` builds the registry engine, the catalog and its change listener, the router, the
capture writer and recorder, telemetry, access control, rate limits and the upstream
engines, and hands them to the `GatewayService` that serves each request
(`proxy.service`); `proxy.app` runs it for the app's lifespan.
"""

from __future__ import annotations

import asyncio
import logging

from proxy.auth import AccessControl
from proxy.capture import CaptureRecord, CaptureWriter, Spool
from proxy.capture.recorder import Recorder
from proxy.catalog import Catalog
from proxy.config import GatewayConfig
from proxy.engines.pool import EnginePool
from proxy.pipeline import ServingPipeline
from proxy.rate_limit import RateLimit
from proxy.router import Router
from proxy.service import GatewayService
from proxy.shadow import Shadows
from proxy.telemetry import CallTelemetry
from registry import ChangeListener, SessionRoute, check_schema, create_db_engine

__all__ = ["Gateway"]

log = logging.getLogger(__name__)


class Gateway:
    """Long-lived state of one gateway process; `service` serves its requests."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.db = create_db_engine(config.database_url)
        check_schema(self.db)
        self.catalog = Catalog(self.db, ttl=config.catalog_ttl, timeout=config.registry_timeout)
        # Registry announcements of alias, key and grant changes (PostgreSQL only).
        self.changes = ChangeListener.for_engine(self.db, self.catalog.changed, self.catalog.expire)
        self.router = Router(
            self.catalog, self._record_placement, deadline=config.placement_deadline
        )
        self.writer = CaptureWriter(
            self.db,
            Spool(config.spool_dir),
            batch_size=config.capture_batch_size,
            flush_interval=config.capture_flush_interval,
        )
        self.telemetry = CallTelemetry(config)
        self.recorder = Recorder(config, self.writer, self.catalog, self.telemetry)
        self.engines = EnginePool.of(config)
        pipeline = ServingPipeline(self.engines, self.catalog.memory_index, config.upstream_timeout)
        self.shadows = Shadows(pipeline, self.recorder)
        self.service = GatewayService(
            config,
            self.catalog,
            AccessControl(self.catalog),
            RateLimit(config.rate_limit),
            self.router,
            pipeline,
            self.recorder,
            self.shadows,
        )
        self._background: set[asyncio.Task] = set()

    async def start(self) -> None:
        await asyncio.to_thread(self.writer.start)
        asyncio.get_running_loop().add_reader(self.writer.placements, self._adopt_placements)
        self._spawn(self._sweep_idle_sessions())
        if self.changes is not None:
            self._spawn(self.changes.run())

    def _spawn(self, coroutine) -> None:
        task = asyncio.create_task(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _record_placement(self, route: SessionRoute) -> None:
        self.writer.submit([CaptureRecord("session_route", route)])

    def _adopt_placements(self) -> None:
        for route in self.writer.lost_placements():
            self.router.adopt(route)

    async def _sweep_idle_sessions(self) -> None:
        """Close sessions gone quiet (the trajectory ends, abandonment is a weak signal), and
        restart the capture drain should it have died."""
        while True:
            await asyncio.sleep(self.config.sweep_interval)
            try:
                await self.recorder.close_idle_sessions(self.config.abandon_after)
            except Exception:  # noqa: BLE001 - the sweep must outlive one bad session
                log.exception("closing idle sessions failed")
            try:
                await asyncio.to_thread(self.writer.ensure_running)
            except Exception:  # noqa: BLE001 - tried again at the next sweep
                log.exception("restarting the capture drain failed")

    async def close(self) -> None:
        await self.router.drain()
        await self.shadows.aclose()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.engines.aclose()
        asyncio.get_running_loop().remove_reader(self.writer.placements)
        await self.catalog.aclose()
        await asyncio.to_thread(self.writer.stop)
        await asyncio.to_thread(self.telemetry.shutdown)
        self.db.dispose()
