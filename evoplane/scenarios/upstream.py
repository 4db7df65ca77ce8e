"""The scenario worlds' models behind one OpenAI-compatible server on loopback.

Each world's agent is created with `--engine openai --base-url <this server>/v1 --model
<world>-llm`, as a user points Evoplane at any hosted or self-hosted model; the server
answers chat completions (plain and streamed) with that world's `ScriptedModel`.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from evoplane.scenarios.model import ScriptedModel

__all__ = ["ModelServer", "model_name"]


def model_name(world: str) -> str:
    """The model id a world's agent asks for."""
    return f"{world}-llm"


class ModelServer:
    """A uvicorn server in a background thread serving `models` (model id -> model)."""

    def __init__(self, models: dict[str, ScriptedModel]) -> None:
        self.models = models  # the runner adds each scenario's model as it starts
        self.requests = 0
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}/v1"
        self._server = uvicorn.Server(
            uvicorn.Config(_app(self), log_config=None, log_level="warning", access_log=False)
        )
        self._thread = threading.Thread(target=self._serve, name="scenario-models", daemon=True)

    def __enter__(self) -> ModelServer:
        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the scenario model server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *_: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def _serve(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._socket]))


def _app(server: ModelServer) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        data = [{"id": name, "object": "model", "owned_by": "scenarios"} for name in server.models]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        model = server.models.get(body.get("model"))
        if model is None:
            message = f"The model {body.get('model')!r} does not exist."
            error = {"message": message, "type": "invalid_request_error", "code": "model_not_found"}
            return JSONResponse({"error": error}, status_code=404)
        server.requests += 1
        reply = _completion(body, model.reply(body))
        if body.get("stream"):
            return StreamingResponse(_chunks(reply), media_type="text/event-stream")
        return reply

    return app


def _completion(body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    prompt = sum(len(json.dumps(m)) for m in body.get("messages") or []) // 4
    answer = len(json.dumps(message)) // 4
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": answer,
            "total_tokens": prompt + answer,
        },
    }


def _chunks(reply: dict[str, Any]) -> Iterator[str]:
    """The reply as server-sent chunks: the role, the content or tool calls, the finish."""
    choice = reply["choices"][0]
    message = choice["message"]
    head = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    for delta in deltas:
        chunk = head | {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        yield f"data: {json.dumps(chunk)}\n\n"
    last = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    yield f"data: {json.dumps(head | {'choices': [last], 'usage': reply['usage']})}\n\n"
    yield "data: [DONE]\n\n"
