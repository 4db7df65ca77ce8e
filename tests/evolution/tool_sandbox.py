"""A tenant's tool sandbox on loopback, speaking the tool-simulator protocol.

    with ToolSandbox({"lookup_order": lookup_order}) as sandbox:
        ToolSimulatorSpec(tenant="acme", url=sandbox.url)
        ...
        assert sandbox.calls[0]["tool"] == "lookup_order"

Each tool is a function of the parsed arguments returning the tool's result; a result with
an `error_type` is a refusal. Unknown tools get 404 (the replay stops at the divergence).
The app is plain ASGI, so tests can also reach it in process with `httpx.ASGITransport`.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn

__all__ = ["ToolSandbox"]


class ToolSandbox:
    """Runs `tools` for replayed calls; keeps every request it received in `calls`."""

    def __init__(self, tools: dict[str, Callable[[dict[str, Any]], Any]]) -> None:
        self.tools = tools
        self.calls: list[dict[str, Any]] = []
        self.fail_with: int | None = None  # answer every request with this status instead
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/simulate"
        config = uvicorn.Config(
            self, host="127.0.0.1", port=self.port, log_config=None, log_level="warning"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="sandbox", daemon=True)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body)
        self.calls.append(request)
        tool = self.tools.get(request["tool"])
        if self.fail_with is not None:
            status, answer = self.fail_with, {"detail": "sandbox down"}
        elif tool is None:
            status, answer = 404, {"detail": f"no tool {request['tool']} in this sandbox"}
        else:
            returned = tool(request["arguments"])
            error = returned.get("error_type") if isinstance(returned, dict) else None
            status, answer = 200, {"output": returned, "error": error}
        data = json.dumps(answer).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    def __enter__(self) -> ToolSandbox:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("tool sandbox did not start")
            time.sleep(0.005)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
