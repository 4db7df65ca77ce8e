"""Servers on loopback that speak another protocol than chat completions, answering like
the scripted chat upstream (`tests.support.upstream`: echo, `call <tool> with {json}`).

    with AnthropicUpstream(api_key="sk-ant-test") as upstream:   # POST /v1/messages
    with ResponsesUpstream() as upstream:                         # POST /v1/responses
        ...  # a version with engine "anthropic" / "openai-responses" and upstream.base_url
        assert upstream.requests[-1]["system"] == ...

Each reads a request the way the gateway's own route for that protocol does
(`proxy.protocols`), answers it as the scripted chat model would, and writes the answer in
its protocol's shape, whole or as that protocol's stream events. They refuse what the real
APIs refuse and an engine must not send: a wrong key, no `anthropic-version`, no
`max_tokens`, Messages turns that do not alternate, a Responses request that asks the
upstream to store it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from proxy.errors import GatewayError, error_body
from proxy.protocols import messages, responses
from tests.support.upstream import completion, completion_chunks

__all__ = ["AnthropicUpstream", "ResponsesUpstream"]


class _ProtocolUpstream:
    path = ""

    def __init__(self, api_key: str = "sk-test", model: str = "upstream-model") -> None:
        self.api_key, self.model = api_key, model
        self.requests: list[dict] = []
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        app = Starlette(routes=[Route(f"/v1{self.path}", self._serve, methods=["POST"])])
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._count = 0

    def __enter__(self):
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {type(self).__name__} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    async def _serve(self, request: Request):
        problem = self.refusal(request.headers)
        if problem:
            return self.error(*problem)
        body = json.loads(await request.body())
        self.requests.append(body)
        problem = self.broken_rule(body)
        if problem:
            return self.error(400, problem)
        try:
            chat = self.as_chat(body)
        except GatewayError as error:
            return self.error(400, error.message)
        self._count += 1
        reply = completion(chat, f"chat-{self._count}", self.model)
        if not body.get("stream"):
            return JSONResponse(self.answer(body, reply))
        events = self.events(body, reply, [*completion_chunks(chat, reply)])
        return StreamingResponse(
            (_sse(kind, event) for kind, event in events), media_type="text/event-stream"
        )

    def refusal(self, headers) -> tuple[int, str] | None:
        if headers.get("authorization") != f"Bearer {self.api_key}":
            return 401, "invalid api key"
        return None


class AnthropicUpstream(_ProtocolUpstream):
    """Anthropic's Messages API (`x-api-key`, `anthropic-version`)."""

    path = "/messages"

    def refusal(self, headers) -> tuple[int, str] | None:
        if headers.get("x-api-key") != self.api_key:
            return 401, "invalid x-api-key"
        if not headers.get("anthropic-version"):
            return 400, "anthropic-version header is required"
        return None

    def error(self, status: int, message: str) -> JSONResponse:
        return JSONResponse(messages.error_document(status, message), status_code=status)

    def broken_rule(self, body: dict) -> str | None:
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        roles = [turn.get("role") for turn in body.get("messages") or []]
        if "system" in roles:
            return 'messages: Unexpected role "system"; use the top-level system parameter'
        if any(a == b for a, b in zip(roles, roles[1:], strict=False)) or roles[:1] != ["user"]:
            return "messages: roles must alternate between user and assistant, starting with user"
        return None

    def as_chat(self, body: dict) -> dict:
        return messages.chat_request(body)

    def _context(self, body: dict) -> messages.MessageContext:
        return messages.MessageContext(f"msg_test{self._count}", body.get("model") or self.model)

    def answer(self, body: dict, reply: dict) -> dict:
        return messages.message_object(reply, self._context(body))

    def events(self, body: dict, reply: dict, chunks: list[dict]) -> Iterator[tuple[str, dict]]:
        translator = messages.MessagesStream(self._context(body))
        for kind, event in translator.start():
            if kind == "message_start":  # Anthropic counts the prompt at the start
                event["message"]["usage"]["input_tokens"] = reply["usage"]["prompt_tokens"]
            yield kind, event
        for chunk in [*chunks, {"usage": reply["usage"]}]:
            yield from translator.chunk(chunk)
        yield from translator.finish()


class ResponsesUpstream(_ProtocolUpstream):
    """OpenAI's Responses API (`Authorization: Bearer`)."""

    path = "/responses"

    def error(self, status: int, message: str) -> JSONResponse:
        return JSONResponse(error_body(status, message), status_code=status)

    def broken_rule(self, body: dict) -> str | None:
        if body.get("store", True) is not False:
            return "store: the gateway keeps the conversation; an upstream must not"
        if body.get("previous_response_id"):
            return "previous_response_id: this upstream stores nothing"
        return None

    def as_chat(self, body: dict) -> dict:
        return responses.chat_request(body)

    def _context(self, body: dict) -> responses.ResponseContext:
        return responses.ResponseContext(f"resp_test{self._count}", body)

    def answer(self, body: dict, reply: dict) -> dict:
        return responses.response_object(reply, self._context(body))

    def events(self, body: dict, reply: dict, chunks: list[dict]) -> Iterator[tuple[str, dict]]:
        translator = responses.ResponsesStream(self._context(body))
        yield from translator.start()
        for chunk in [*chunks, {"usage": reply["usage"]}]:
            yield from translator.chunk(chunk)
        yield from translator.finish()


def _sse(kind: str, event: dict) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(event)}\n\n".encode()
