"""A Messages API server on loopback, answering like the scripted chat upstream.

    with AnthropicUpstream(api_key="sk-ant-test") as upstream:
        ...  # a version with engine "anthropic", base_url upstream.base_url
        assert upstream.requests[-1]["system"] == ...

It reads a request the way the gateway's `/v1/messages` does (`proxy.protocols.messages`),
answers as `tests.support.upstream` would (echo, `call <tool> with {json}`), and writes the
answer in Anthropic's shape, whole or as Anthropic's stream events. It refuses requests
without its key or an `anthropic-version`, and ones that break the API's rules the engine
must keep (no max_tokens, turns that do not alternate, a system message among the turns).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from proxy.errors import GatewayError
from proxy.protocols.messages import (
    MessageContext,
    MessagesStream,
    chat_request,
    error_document,
    message_object,
)
from tests.support.upstream import completion, completion_chunks

__all__ = ["AnthropicUpstream"]


class AnthropicUpstream:
    def __init__(self, api_key: str = "sk-ant-test", model: str = "claude-test") -> None:
        self.api_key, self.model = api_key, model
        self.requests: list[dict] = []
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._count = 0

    def __enter__(self) -> AnthropicUpstream:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the Anthropic stand-in did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    async def _messages(self, request: Request):
        if request.headers.get("x-api-key") != self.api_key:
            return _error(401, "invalid x-api-key")
        if not request.headers.get("anthropic-version"):
            return _error(400, "anthropic-version header is required")
        body = json.loads(await request.body())
        self.requests.append(body)
        problem = _broken_rule(body)
        if problem:
            return _error(400, problem)
        try:
            chat = chat_request(body)
        except GatewayError as error:
            return _error(400, error.message)
        self._count += 1
        reply = completion(chat, f"chat-{self._count}", self.model)
        context = MessageContext(f"msg_test{self._count}", body.get("model") or self.model)
        if not body.get("stream"):
            return JSONResponse(message_object(reply, context))
        translator = MessagesStream(context)

        def events():
            for kind, event in translator.start():
                if kind == "message_start":  # Anthropic counts the prompt at the start
                    event["message"]["usage"]["input_tokens"] = reply["usage"]["prompt_tokens"]
                yield _sse(kind, event)
            for chunk in [*completion_chunks(chat, reply), {"usage": reply["usage"]}]:
                for kind, event in translator.chunk(chunk):
                    yield _sse(kind, event)
            for kind, event in translator.finish():
                yield _sse(kind, event)

        return StreamingResponse(events(), media_type="text/event-stream")


def _broken_rule(body: dict) -> str | None:
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    roles = [turn.get("role") for turn in body.get("messages") or []]
    if "system" in roles:
        return 'messages: Unexpected role "system"; use the top-level system parameter'
    if any(a == b for a, b in zip(roles, roles[1:], strict=False)) or roles[:1] != ["user"]:
        return "messages: roles must alternate between user and assistant, starting with user"
    return None


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(error_document(status, message), status_code=status)


def _sse(kind: str, event: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode()
