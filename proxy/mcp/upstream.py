"""One SDK client per upstream MCP server, held open for the gateway's life and shared by
every caller of that server (reconnected after it fails); an HTTP server's tool calls go
over the gateway's own kept-alive connection when its protocol allows (`proxy.mcp.forward`)."""

from __future__ import annotations

import asyncio
import logging
from contextlib import nullcontext
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from proxy.mcp.forward import CLIENT_INFO, CallForwarder, NotForwardable
from registry import McpServer

__all__ = ["McpUnavailable", "UpstreamPool"]

log = logging.getLogger(__name__)


class McpUnavailable(Exception):
    """The upstream MCP server could not be reached, or did not answer in time."""


class UpstreamServer:
    """The connection to one upstream server, opened on first use.

    The SDK client's context must be entered and left in one task, so a task of its own
    holds it open until `aclose` (or until the connection breaks)."""

    def __init__(self, server: McpServer, *, timeout: float, connect_timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._client: Client | None = None
        self._holder: asyncio.Task | None = None
        self._closing = asyncio.Event()
        self._lock = asyncio.Lock()
        self._read_only: dict[str, bool] = {}
        self._forwarder = (
            CallForwarder(server.url, timeout=timeout, connect_timeout=connect_timeout)
            if server.url is not None
            else None
        )

    def _target(self) -> Any:
        if self.server.url is not None:
            return self.server.url
        command = self.server.command or []
        return StdioServerParameters(command=command[0], args=command[1:])

    async def client(self) -> Client:
        if self._client is not None and self._holder is not None and not self._holder.done():
            return self._client
        async with self._lock:
            if self._client is None or self._holder is None or self._holder.done():
                await self._connect()
        assert self._client is not None
        return self._client

    async def _connect(self) -> None:
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._closing = asyncio.Event()
        self._holder = asyncio.create_task(self._hold(ready, self._closing))
        try:
            self._client = await asyncio.wait_for(ready, self.connect_timeout)
        except TimeoutError:
            self._closing.set()
            raise McpUnavailable(
                f"The MCP server '{self.server.name}' did not complete its handshake in "
                f"{self.connect_timeout:g} s."
            ) from None
        except Exception as error:  # noqa: BLE001 - any failure to connect reads the same
            raise McpUnavailable(
                f"The MCP server '{self.server.name}' could not be reached: {_reason(error)}"
            ) from None

    async def _hold(self, ready: asyncio.Future, closing: asyncio.Event) -> None:
        client = Client(
            self._target(), read_timeout_seconds=self.timeout, cache=None, client_info=CLIENT_INFO
        )
        try:
            async with client:
                ready.set_result(client)
                await closing.wait()
        except BaseException as error:  # noqa: BLE001 - reported to whoever waits for it
            if not ready.done():
                ready.set_exception(error if isinstance(error, Exception) else RuntimeError())
            elif not isinstance(error, asyncio.CancelledError | anyio.get_cancelled_exc_class()):
                log.warning("MCP server %r disconnected: %s", self.server.name, _reason(error))

    async def list_tools(self, cursor: str | None = None) -> types.ListToolsResult:
        listing = await self._call(
            lambda client: client.list_tools(cursor=cursor, cache_mode="refresh")
        )
        for tool in listing.tools:
            self._read_only[tool.name] = bool(tool.annotations and tool.annotations.read_only_hint)
        return listing

    def read_only(self, tool: str) -> bool:
        """Whether the server marks the tool read-only (as of its last listing)."""
        return self._read_only.get(tool, False)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        forwarder = self._forwarder
        if forwarder is not None:
            try:
                # aiohttp's own total timeout bounds it: no anyio cancel scope (a tenth of
                # the gateway's time on a call, measured).
                return await self._call(
                    lambda client: forwarder.call_tool(client.protocol_version, name, arguments),
                    bounded=False,
                )
            except NotForwardable:
                pass
        return await self._call(lambda client: client.call_tool(name, arguments))

    async def _call(self, send, *, bounded: bool = True) -> Any:
        client = await self.client()
        try:
            with anyio.fail_after(self.timeout) if bounded else nullcontext():
                return await send(client)
        except (MCPError, NotForwardable):
            raise  # the server's own JSON-RPC error, or a call for the SDK client: all is well
        except TimeoutError:
            self.reset()
            raise McpUnavailable(
                f"The MCP server '{self.server.name}' did not answer in {self.timeout:g} s."
            ) from None
        except Exception as error:  # noqa: BLE001 - a broken connection: reconnect next time
            self.reset()
            raise McpUnavailable(
                f"The MCP server '{self.server.name}' failed: {_reason(error)}"
            ) from None

    def reset(self) -> None:
        self._closing.set()
        self._client = None

    async def aclose(self) -> None:
        self.reset()
        if self._forwarder is not None:
            await self._forwarder.aclose()
        if self._holder is not None:
            await asyncio.wait([self._holder], timeout=5)


def _reason(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__


class UpstreamPool:
    """The upstream servers in use, by name; a changed registration reconnects."""

    def __init__(self, *, timeout: float, connect_timeout: float) -> None:
        self.timeout, self.connect_timeout = timeout, connect_timeout
        self._servers: dict[str, UpstreamServer] = {}
        self._retired: list[UpstreamServer] = []

    def get(self, server: McpServer) -> UpstreamServer:
        found = self._servers.get(server.name)
        if found is not None and (found.server.url, found.server.command) != (
            server.url,
            server.command,
        ):
            found.reset()
            self._retired.append(found)
            found = None
        if found is None:
            found = self._servers[server.name] = UpstreamServer(
                server, timeout=self.timeout, connect_timeout=self.connect_timeout
            )
        return found

    async def aclose(self) -> None:
        servers = [*self._servers.values(), *self._retired]
        await asyncio.gather(*(s.aclose() for s in servers))
        self._servers.clear()
        self._retired.clear()
