"""`/mcp/{server}` as the gateway mounts it: the MCP proxy (and the `mcp` SDK, a second of
imports) is loaded on the route's first request, not at every gateway's start."""

from __future__ import annotations

import asyncio

__all__ = ["McpRoute"]


class McpRoute:
    """An ASGI app that starts the MCP proxy when first called and serves through it."""

    def __init__(self) -> None:
        self.service = None
        self._proxy = None
        self._lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._holder: asyncio.Task | None = None

    def bind(self, service) -> None:
        self.service = service

    async def __call__(self, scope, receive, send) -> None:
        proxy = self._proxy or await self._start()
        await proxy(scope, receive, send)

    async def _start(self):
        async with self._lock:
            if self._proxy is None:
                from proxy.mcp.server import McpProxy

                proxy = McpProxy()
                ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                # The proxy's sessions live in a task group that must outlast this request.
                self._holder = asyncio.create_task(self._hold(proxy, ready))
                await ready
                self._proxy = proxy
        return self._proxy

    async def _hold(self, proxy, ready: asyncio.Future) -> None:
        try:
            async with proxy.run(self.service):
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as error:
            if not ready.done():
                ready.set_exception(error)
            raise

    async def aclose(self) -> None:
        """Stop the proxy (its sessions and upstream connections), if it was started."""
        self._stop.set()
        if self._holder is not None:
            await asyncio.gather(self._holder, return_exceptions=True)
