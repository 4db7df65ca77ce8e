"""The engine for any OpenAI-compatible server: vLLM, SGLang, llama.cpp, hosted APIs.

Why aiohttp and not httpx (already a dependency): measured, not assumed. In
benchmarks/upstream_clients.py ("Upstream HTTP clients" in benchmarks/RESULTS.md, 2 cores,
loopback upstream answering at once), a pooled aiohttp session spent 325 µs of client CPU per
request against httpx's 1,357 µs at concurrency 1 (p50 0.58 ms against 1.53 ms), and 224 µs
against 1,478 µs at concurrency 8 (p50 2.59 ms against 8.80 ms; httpx's p99 was 96 ms). With
a 20 ms upstream aiohttp still used 0.22-0.36x the CPU. A gateway on a small machine runs out
of CPU long before it runs out of network, so the CPU per request decides.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import aiohttp

from proxy.engines.base import UpstreamEngine, UpstreamError, UpstreamTimeout

__all__ = ["OpenAICompatEngine"]

# Below the 5 s keep-alive of uvicorn (which vLLM and SGLang serve with), so we never send a
# request on a connection the server is closing: that request could not safely be retried.
KEEPALIVE_S = 4.0
# SSE lines with many top_logprobs run past aiohttp's 64 KiB default line limit.
READ_BUFFER = 2**20


class OpenAICompatEngine(UpstreamEngine):
    """POSTs /chat/completions to one OpenAI-compatible server over one pooled session.

    Args:
        base_url: the server's API root, e.g. "http://vllm:8000/v1".
        api_key: sent as `Authorization: Bearer`; None for servers without auth.
        connect_timeout: seconds to open a TCP connection (pool waits count against `timeout`).
        max_connections: pool size, the most requests in flight to this server at once.
        connect_retries: extra attempts when the connection cannot be opened. Nothing else is
            retried: once a request is sent, a retry could bill or run a completion twice.
        retry_backoff: seconds before the first retry, doubled for each next one.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        connect_timeout: float,
        max_connections: int,
        connect_retries: int = 2,
        retry_backoff: float = 0.1,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.connect_retries = connect_retries
        self.retry_backoff = retry_backoff
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._connect_timeout = connect_timeout
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    async def complete(
        self, body: dict, *, model: str | None, timeout: float, sent: asyncio.Event | None = None
    ) -> dict:
        """One chat completion; `timeout` bounds everything, connection retries included."""
        payload = self._request(body, model, stream=False)
        try:
            async with asyncio.timeout(timeout):
                async with await self._post(payload, sock_read=None, sent=sent) as response:
                    await _raise_for_status(response)
                    raw = await response.read()
        except TimeoutError as error:
            raise UpstreamTimeout(f"{self.base_url} did not answer within {timeout} s") from error
        except aiohttp.ClientError as error:
            raise self._lost(error) from error
        try:
            answer = json.loads(raw)
        except ValueError as error:
            raise UpstreamError(
                200, f"{self.base_url} answered with non-JSON", _text(raw)
            ) from error
        try:
            return self._completion(answer)
        except (KeyError, TypeError, ValueError) as error:
            message = f"{self.base_url} answered with no {self.answer_name}"
            raise UpstreamError(200, message, _text(raw)) from error

    async def stream(
        self, body: dict, *, model: str | None, timeout: float
    ) -> AsyncGenerator[dict]:
        """Chunks of a streamed chat completion; `timeout` bounds each wait, not the stream."""
        payload = self._request(body, model, stream=True)
        reader = self._stream_reader()
        try:
            async with asyncio.timeout(timeout):
                response = await self._post(payload, sock_read=timeout)
            async with response:
                await _raise_for_status(response)
                async for data in _sse_data(response.content):
                    chunks, done = reader(data)
                    for chunk in chunks:
                        yield chunk
                    if done:
                        return
        except TimeoutError as error:
            raise UpstreamTimeout(f"{self.base_url} stalled for {timeout} s") from error
        except aiohttp.ClientError as error:
            raise self._lost(error) from error

    # --- the protocol spoken upstream: an engine for another API overrides these ----------

    answer_name = "chat completion"  # what an answer is called, for errors

    def _request(self, body: dict, model: str | None, *, stream: bool) -> dict:
        """What to POST for the chat-completions request `body`."""
        return _payload(body, model, stream=stream)

    def _completion(self, answer: Any) -> dict:
        """The chat completion for the upstream's parsed answer."""
        return answer

    def _stream_reader(self) -> Callable[[str], tuple[list[dict], bool]]:
        """A reader of one stream's event data: (the chat chunks it makes, whether the
        stream has ended)."""
        return lambda data: ([], True) if data == "[DONE]" else ([_chunk(data)], False)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _post(
        self, payload: dict, *, sock_read: float | None, sent: asyncio.Event | None = None
    ) -> aiohttp.ClientResponse:
        """Sends `payload`, retrying only while no connection could be opened."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._connect_timeout, sock_read=sock_read
        )
        for attempt in range(self.connect_retries + 1):
            try:
                return await self._client().post(
                    self._url,
                    json=payload,
                    headers=self._headers,
                    timeout=timeout,
                    trace_request_ctx={"sent": sent},
                )
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as error:
                if attempt == self.connect_retries:
                    raise UpstreamError(None, self._unreachable(error, attempt + 1)) from error
                await asyncio.sleep(self.retry_backoff * 2**attempt)
        raise AssertionError("unreachable")

    def _client(self) -> aiohttp.ClientSession:
        # Created on first use: a session belongs to the event loop that is running then.
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, keepalive_timeout=KEEPALIVE_S
            )
            traces = aiohttp.TraceConfig()
            traces.on_request_chunk_sent.append(_mark_sent)
            self._session = aiohttp.ClientSession(
                connector=connector, read_bufsize=READ_BUFFER, trace_configs=[traces]
            )
        return self._session

    def _unreachable(self, error: Exception, attempts: int) -> str:
        return (
            f"could not connect to {self.base_url} ({error}; {attempts} attempt(s)); "
            "check that the engine is running and the base URL is right"
        )

    def _lost(self, error: aiohttp.ClientError) -> UpstreamError:
        message = f"{self.base_url} broke the connection mid-request ({error!r}); not retried"
        return UpstreamError(None, message)


async def _mark_sent(_session, context, _params) -> None:
    """Tell the caller its request body is on the wire (it may now do other work)."""
    sent = (context.trace_request_ctx or {}).get("sent")
    if sent is not None:
        sent.set()


def _payload(body: dict, model: str | None, *, stream: bool) -> dict:
    payload = dict(body)
    if model is not None:
        payload["model"] = model
    if stream:
        payload["stream"] = True
    else:  # OpenAI rejects stream_options without stream
        payload.pop("stream", None)
        payload.pop("stream_options", None)
    return payload


async def _raise_for_status(response: aiohttp.ClientResponse) -> None:
    if response.status < 400:
        return
    raw = await response.read()
    try:
        body: Any = json.loads(raw)
    except ValueError:
        body = _text(raw)
    message = _error_message(body) or response.reason or ""
    retry_after = response.headers.get("Retry-After")
    raise UpstreamError(response.status, message, body, retry_after=retry_after)


def _error_message(body: Any) -> str | None:
    """The message of OpenAI's {"error": {"message"}}, vLLM's {"message"}, FastAPI's {"detail"}."""
    if isinstance(body, str):
        return body[:500] or None
    if not isinstance(body, dict):
        return None
    error = body.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return str(error or body.get("message") or body.get("detail") or "") or None


async def _sse_data(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The data of each server-sent event; comments (keep-alive pings) are skipped."""
    lines: list[str] = []
    async for raw in content:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        elif not line and lines:
            yield "\n".join(lines)
            lines = []
    if lines:
        yield "\n".join(lines)


def _chunk(data: str) -> dict:
    try:
        chunk = json.loads(data)
    except ValueError as error:
        raise UpstreamError(200, "a streamed chunk is not JSON", data) from error
    if "error" in chunk and not chunk.get("choices"):  # vLLM and SGLang report mid-stream errors
        raise UpstreamError(None, _error_message(chunk) or "error in stream", chunk)
    return chunk


def json_event(data: str) -> dict[str, Any]:
    """A streamed event's data as the JSON object it must be (another API's engine reads
    its own events so)."""
    try:
        event = json.loads(data)
    except ValueError as error:
        raise UpstreamError(200, "a streamed event is not JSON", data) from error
    if not isinstance(event, dict):
        raise UpstreamError(200, "a streamed event is not a JSON object", data)
    return event


def _text(raw: bytes) -> str:
    return raw.decode(errors="replace")
