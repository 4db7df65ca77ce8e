"""uvicorn's httptools protocol with a response's head and first body bytes sent as one write.

uvicorn writes the status line and headers the moment the app starts its response, and
the body in a second write. On loopback each write wakes the client; on a busy host the
first wake often preempts the gateway before the body goes out, so the client reads the
head alone, parses it and sleeps again. Held until the next write in the same turn of the
event loop (a response the app completes at once) or until that turn ends, the head goes
out with the body or, at worst, one loop turn later.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["CoalescingHttpProtocol"]


class CoalescingHttpProtocol(HttpToolsProtocol):
    """`uvicorn.run(..., http=CoalescingHttpProtocol)`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(_HeadHolding(transport, self.loop))  # type: ignore[arg-type]


class _HeadHolding:
    """A transport whose response heads wait for the write that follows them."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes) -> None:
        if self._held is not None:
            data, self._held = self._held + data, None
        elif data.startswith(b"HTTP/") and data.endswith(b"\r\n\r\n"):
            self._held = data
            self._loop.call_soon(self._flush)
            return
        self._transport.write(data)

    def _flush(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)
