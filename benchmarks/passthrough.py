"""The floor for any Python gateway: a bare pass-through proxy, no auth, no capture.

    python -m benchmarks.passthrough --upstream URL --port N

A raw ASGI app on the same server stack as the gateway (uvicorn, httptools, uvloop) that
forwards the request body to the upstream with a pooled aiohttp session and returns the
answer unchanged. The gateway benchmark runs it beside the gateway, so the added latency
of the extra loopback hop and the HTTP server is measured on its own, on the same machine
in the same run.
"""

from __future__ import annotations

import argparse

import aiohttp
import uvicorn


def upstream_connector() -> aiohttp.TCPConnector:
    """Pooled connections to the upstream, dropped after 4 s idle as the gateway's are
    (`proxy.engines.openai_compat.KEEPALIVE_S`): below the upstream server's own 5 s, so a
    request never goes out on a connection the upstream is closing (a 500 here)."""
    return aiohttp.TCPConnector(limit=0, keepalive_timeout=4.0)


def passthrough_app(upstream: str):
    """An ASGI app that POSTs each request body to `upstream` + path and relays the answer."""
    session: aiohttp.ClientSession | None = None

    async def app(scope, receive, send):
        nonlocal session
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            if session is not None:
                await session.close()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if session is None:
            session = aiohttp.ClientSession(connector=upstream_connector())
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path = scope["path"].removeprefix("/v1")
        async with session.post(
            upstream + path, data=body, headers={"Content-Type": "application/json"}
        ) as answer:
            payload = await answer.read()
            status = answer.status
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="base URL, e.g. http://127.0.0.1:9000/v1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(
        passthrough_app(args.upstream.rstrip("/")),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
