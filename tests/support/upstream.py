"""A real OpenAI-compatible chat server on loopback, scripted for tests and benchmarks.

    with ScriptedUpstream(delay_ms=0) as upstream:
        engine = OpenAICompatEngine(upstream.base_url, ...)
        ...
        assert upstream.requests[-1]["model"] == "qwen3-8b"

Replies are derived from the request, so a test can see what reached the upstream: the text is
`echo: <last user message>`, followed by ` (system: <system prompt>)` when there is one. A last
message from the user containing `call <tool> with {json}`, for a tool listed in `tools`, is
answered with that tool call (after a tool's result the model answers in text).

`Behaviour` makes the model depend on its context the way a real one does, for replay and
operator tests: seeded sampling at temperature > 0, tool arguments written the way the tool
schema describes them, answers taken from facts in the system prompt. Standalone, for
benchmarks in their own process:

    python -m tests.support.upstream --delay-ms 20   # prints the base URL; stdin EOF stops it
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import re
import socket
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import uvicorn

__all__ = ["Behaviour", "Fault", "ScriptedUpstream", "completion", "completion_chunks"]

CREATED = 1_700_000_000  # fixed, so replies are byte-for-byte deterministic
TOOL_REQUEST = re.compile(r"call ([\w.-]+) with (\{.*\})", re.DOTALL)


@dataclass(frozen=True)
class Fault:
    """A scripted failure for one chat request: an error status, a hang, or a dropped connection."""

    kind: Literal["status", "hang", "drop"]
    status: int = 500
    message: str = "scripted upstream failure"
    seconds: float = 60.0


@dataclass(frozen=True)
class Behaviour:
    """How the scripted model depends on its context, beyond echoing it.

    Args:
        sampling: at temperature > 0 the text reply ends with sampled words: with a `seed`, a
            deterministic function of the seed, model, decoding and messages (another seed
            samples other words); without one, fresh randomness, as a real sampler gives.
        follows_schema: tool arguments are written the way the offered schema describes
            them: a value outside an `enum` becomes the member it names, a date a `format:
            date` parameter wants in ISO form, an id takes the shape of the parameter's first
            example (in `examples`, or quoted after "like"/"e.g." in its description). A
            bare `pattern` is not read (small models do not read regexes). An argument the
            schema does not name goes to the one unfilled parameter ending in `_<name>`.
        answers: "echo" (above), or "facts": the answer is the system prompt's sentence that
            shares the most words with the user's question, else "I don't know."
    """

    sampling: bool = False
    follows_schema: bool = False
    answers: Literal["echo", "facts"] = "echo"


class ScriptedUpstream:
    """A uvicorn server in a background thread on a free loopback port.

    The port is bound at construction but only listens from `start()`, so until then connections
    are refused: that is how tests script "the engine is not up yet".

    Args:
        delay_ms: fixed time before each chat reply (changeable at runtime).
        models: ids listed by GET /v1/models; the first is the default reply model.
        api_key: when set, chat requests without `Authorization: Bearer <api_key>` get 401.
        record: keep every request body in `requests` (benchmarks turn it off).
        behaviour: how replies depend on the context (default: echo, no sampling).
    """

    def __init__(
        self,
        delay_ms: float = 0,
        *,
        models: tuple[str, ...] = ("scripted-model",),
        api_key: str | None = None,
        record: bool = True,
        behaviour: Behaviour = Behaviour(),
    ) -> None:
        self.delay_ms = delay_ms
        self.behaviour = behaviour
        self.models = models
        self.api_key = api_key
        self.record = record
        self.requests: list[dict] = []
        self.headers: list[dict[str, str]] = []
        self._clients: set[tuple[str, int]] = set()
        self._faults: deque[Fault] = deque()
        self._issued = 0
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None

    @property
    def connections(self) -> int:
        """Distinct client connections (address, port) seen so far."""
        return len(self._clients)

    def fail_next(self, status: int = 500, message: str | None = None, *, times: int = 1) -> None:
        """Answer the next `times` chat requests with `status` and an OpenAI error body."""
        fault = Fault("status", status=status, message=message or f"scripted {status}")
        self._faults.extend([fault] * times)

    def hang_next(self, seconds: float = 60.0, *, times: int = 1) -> None:
        """Hold the next `times` chat requests `seconds` (or until stop) before answering."""
        self._faults.extend([Fault("hang", seconds=seconds)] * times)

    def drop_next(self, *, times: int = 1) -> None:
        """Close the connection on the next `times` chat requests, after reading them."""
        self._faults.extend([Fault("drop")] * times)

    def reset(self) -> None:
        """Forget recorded requests, connections and pending faults (for a shared upstream)."""
        self.requests.clear()
        self.headers.clear()
        self._clients.clear()
        self._faults.clear()

    def start(self) -> ScriptedUpstream:
        """Serve in a background thread; returns once the port accepts connections."""
        config = uvicorn.Config(
            self,
            http="httptools",
            ws="none",
            lifespan="off",
            log_config=None,  # never reconfigure the test process's logging
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="scripted-upstream", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"scripted upstream on port {self.port} did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Release hanging requests, shut the server down and join its thread."""
        if self._server is None or self._thread is None:
            self._socket.close()
            return
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> ScriptedUpstream:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self) -> None:
        try:
            import uvloop

            loop_factory = uvloop.new_event_loop
        except ImportError:  # uvloop ships with uvicorn[standard]; plain asyncio works too
            loop_factory = None
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            runner.run(self._serve_async())

    async def _serve_async(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        assert self._server is not None
        await self._server.serve(sockets=[self._socket])

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        """The ASGI app: bare, without a framework, so benchmarks measure the client."""
        self._clients.add(tuple(scope["client"]))
        route = (scope["method"], scope["path"])
        if route == ("POST", "/v1/chat/completions"):
            await self._chat(scope, receive, send)
        elif route == ("GET", "/v1/models"):
            data = [{"id": m, "object": "model", "owned_by": "evoplane-tests"} for m in self.models]
            await _send_json(send, 200, {"object": "list", "data": data})
        else:
            await _send_error(send, 404, f"no route {scope['method']} {scope['path']}")

    async def _chat(self, scope: dict, receive: Any, send: Any) -> None:
        raw = await _read_body(receive)
        try:
            body = json.loads(raw)
        except ValueError:
            return await _send_error(send, 400, "request body is not JSON")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if self.record:
            self.requests.append(body)
            self.headers.append(headers)
        if self.api_key and headers.get("authorization") != f"Bearer {self.api_key}":
            return await _send_error(send, 401, "Incorrect API key provided", "invalid_api_key")
        fault = self._faults.popleft() if self._faults else None
        if fault is not None and fault.kind == "status":
            return await _send_error(send, fault.status, fault.message)
        if fault is not None and fault.kind == "drop":
            return await _drop_connection(send, receive)
        if fault is not None and fault.kind == "hang":
            assert self._stopping is not None
            try:
                await asyncio.wait_for(self._stopping.wait(), fault.seconds)
            except TimeoutError:
                pass
        if self.delay_ms:
            await asyncio.sleep(self.delay_ms / 1000)
        if not isinstance(body.get("messages"), list) or not body["messages"]:
            return await _send_error(send, 400, "'messages' must be a non-empty list")
        self._issued += 1
        reply = completion(
            body, f"chatcmpl-scripted-{self._issued}", self.models[0], self.behaviour
        )
        if body.get("stream"):
            await _send_sse(send, completion_chunks(body, reply))
        else:
            await _send_json(send, 200, reply)


def completion(
    body: dict, completion_id: str, default_model: str, behaviour: Behaviour = Behaviour()
) -> dict:
    """The `chat.completion` this upstream answers `body` with."""
    text = _reply_text(body["messages"], behaviour)
    if behaviour.sampling:
        text = _sampled(body, text, default_model)
    tool_call = _tool_call(body, behaviour)
    generated = [_choice(body, index, text, tool_call) for index in range(int(body.get("n") or 1))]
    choices = [choice for choice, _ in generated]
    prompt_tokens = sum(len(_tokens(_text_of(m.get("content")))) for m in body["messages"])
    completion_tokens = sum(count for _, count in generated)
    seed = body.get("seed")
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": body.get("model") or default_model,
        "system_fingerprint": "fp_scripted" if seed is None else f"fp_scripted_seed_{seed}",
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def completion_chunks(body: dict, reply: dict) -> Iterator[dict]:
    """The `chat.completion.chunk`s that stream `reply`, token by token, as OpenAI does."""
    head = {key: reply[key] for key in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    for choice in reply["choices"]:
        index, message = choice["index"], choice["message"]
        yield {**head, "choices": [_delta(index, {"role": "assistant", "content": ""})]}
        for call in message.get("tool_calls") or []:
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            opening = {**call, "index": 0, "function": {**call["function"], "arguments": ""}}
            yield {**head, "choices": [_delta(index, {"tool_calls": [opening]})]}
            for part in (arguments[:half], arguments[half:]):
                more = {"index": 0, "function": {"arguments": part}}
                yield {**head, "choices": [_delta(index, {"tool_calls": [more]})]}
        entries = (choice.get("logprobs") or {}).get("content") or []
        for position, token in enumerate(_tokens(message.get("content") or "")):
            delta = _delta(index, {"content": token})
            if entries:
                delta["logprobs"] = {"content": [entries[position]], "refusal": None}
                delta["token_ids"] = [choice["token_ids"][position]]
            yield {**head, "choices": [delta]}
        finish = _delta(index, {})
        finish["finish_reason"] = choice["finish_reason"]
        yield {**head, "choices": [finish]}
    if (body.get("stream_options") or {}).get("include_usage"):
        yield {**head, "choices": [], "usage": reply["usage"]}


def _choice(body: dict, index: int, text: str, tool_call: dict | None) -> tuple[dict, int]:
    """One choice of the reply, and how many tokens it generated."""
    if tool_call is not None:
        generated = _tokens(tool_call["function"]["arguments"])
        message: dict = {"role": "assistant", "content": None, "tool_calls": [tool_call]}
        finish_reason = "tool_calls"
    else:
        generated = _tokens(text if int(body.get("n") or 1) == 1 else f"{text} #{index}")
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish_reason = "length" if limit and len(generated) > limit else "stop"
        generated = generated[:limit] if limit else generated
        message = {"role": "assistant", "content": "".join(generated)}
    choice: dict = {"index": index, "message": message, "logprobs": None}
    choice["finish_reason"] = finish_reason
    if body.get("logprobs"):
        top = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {"content": [_logprob(t, top) for t in generated], "refusal": None}
        # Not OpenAI: vLLM and SGLang can return the sampled token ids; the gateway keeps them.
        choice["token_ids"] = [_token_id(token) for token in generated]
    return choice, len(generated)


def _reply_text(messages: list[dict], behaviour: Behaviour) -> str:
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    system = next((m for m in messages if m.get("role") in {"system", "developer"}), None)
    if behaviour.answers == "facts":
        return _answer_from_facts(_text_of(user.get("content")), messages)
    text = f"echo: {_text_of(user.get('content'))}"
    return text if system is None else f"{text} (system: {_text_of(system.get('content'))})"


def _tool_call(body: dict, behaviour: Behaviour) -> dict | None:
    last = body["messages"][-1]
    if last.get("role") != "user":  # after a tool's result, the model answers in text
        return None
    match = TOOL_REQUEST.search(_text_of(last.get("content")))
    declared = {
        tool.get("function", {}).get("name"): tool.get("function", {}).get("parameters")
        for tool in body.get("tools") or []
    }
    if match is None or match.group(1) not in declared:
        return None
    try:
        requested = json.loads(match.group(2))
    except ValueError:
        return None
    schema = declared[match.group(1)]
    if behaviour.follows_schema and isinstance(requested, dict) and isinstance(schema, dict):
        requested = _following(requested, schema)
    arguments = json.dumps(requested, separators=(",", ":"))
    call_id = f"call_{zlib.crc32(match.group(0).encode()):08x}"
    function = {"name": match.group(1), "arguments": arguments}
    return {"id": call_id, "type": "function", "function": function}


# --- context-dependent behaviour ---------------------------------------------------------

_SAMPLED_WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber coral "
    "ivory jade onyx ruby"
).split()


def _sampled(body: dict, text: str, default_model: str) -> str:
    """`text` with five sampled words, at temperature > 0 (greedy decoding adds none)."""
    if not body.get("temperature"):
        return text
    seed = body.get("seed")
    if seed is None:
        rng: random.Random = random.SystemRandom()
    else:
        context = [
            seed,
            body.get("model") or default_model,
            body.get("temperature"),
            body.get("top_p"),
            [_message_view(m) for m in body["messages"]],
        ]
        digest = hashlib.sha256(json.dumps(context, sort_keys=True).encode()).digest()
        rng = random.Random(digest)
    return f"{text} ~ {' '.join(rng.choice(_SAMPLED_WORDS) for _ in range(5))}"


def _message_view(message: dict) -> list:
    """What of a message a model reads: clients may serialise the rest differently."""
    calls = [
        [(c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments")]
        for c in message.get("tool_calls") or []
    ]
    return [message.get("role"), _text_of(message.get("content")), calls]


_EXAMPLE_IN_TEXT = re.compile(r"""\b(?:like|e\.g\.|example:?)\s+["'`]([^"'`]+)["'`]""", re.I)
_DATE_FORMATS = ("%m/%d/%Y", "%d.%m.%Y", "%Y/%m/%d", "%B %d %Y", "%B %d, %Y", "%b %d, %Y")


def _following(arguments: dict, schema: dict) -> dict:
    """The arguments as a model that reads the schema writes them."""
    properties = schema.get("properties") or {}
    written = {}
    for key, value in arguments.items():
        name = key if key in properties else _parameter_for(key, properties, arguments)
        written[name] = _conformed(value, properties.get(name) or {})
    return written


def _parameter_for(key: str, properties: dict, given: dict) -> str:
    unfilled = [name for name in properties if name.endswith(f"_{key}") and name not in given]
    return unfilled[0] if len(unfilled) == 1 else key


def _conformed(value: Any, prop: dict) -> Any:
    if not isinstance(value, str):
        return value
    if "enum" in prop:
        folded = {re.sub(r"[\W_]", "", str(m)).casefold(): m for m in prop["enum"]}
        return folded.get(re.sub(r"[\W_]", "", value).casefold(), value)
    if prop.get("format") == "date":
        return _iso_date(value)
    examples = prop.get("examples") or _EXAMPLE_IN_TEXT.findall(prop.get("description") or "")
    example = examples[0] if examples and isinstance(examples[0], str) else None
    digits = "".join(re.findall(r"\d", value))
    if example is None or not digits or len(re.findall(r"\d+", example)) != 1:
        return value
    return re.sub(r"\d+", digits, example)


def _iso_date(value: str) -> str:
    for pattern in _DATE_FORMATS:
        try:
            return datetime.strptime(value, pattern).date().isoformat()
        except ValueError:
            continue
    return value


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("what when where which your have does with this that from about there".split())


def _answer_from_facts(question: str, messages: list[dict]) -> str:
    """The system prompt's sentence sharing the most words with the question (the first on
    a tie), else "I don't know."; words of under four letters and common ones don't count."""
    asked = _content_words(question)
    best, shared = None, 0
    for message in messages:
        if message.get("role") not in {"system", "developer"}:
            continue
        for line in _text_of(message.get("content")).splitlines():
            for sentence in re.split(r"(?<=[.!?])\s+", line.strip(" -*\t")):
                found = len(asked & _content_words(sentence))
                if found > shared:
                    best, shared = sentence, found
    return best if best else "I don't know."


def _content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if len(w) >= 4 and w not in _STOP}


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


def _tokens(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)  # joins back to `text` exactly


def _token_id(token: str) -> int:
    return zlib.crc32(token.encode()) % 151_000


def _logprob(token: str, top: int) -> dict:
    logprob = -round((_token_id(token) % 997) / 1994, 4)
    ranked = [(token, logprob), *((f"{token}~{rank}", logprob - rank) for rank in range(1, top))]
    top_logprobs = [_candidate(text, value) for text, value in ranked[:top]]
    return {**_candidate(token, logprob), "top_logprobs": top_logprobs}


def _candidate(token: str, logprob: float) -> dict:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode())}


def _delta(index: int, delta: dict) -> dict:
    return {"index": index, "delta": delta, "logprobs": None, "finish_reason": None}


async def _read_body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_json(send: Any, status: int, payload: dict, headers: tuple = ()) -> None:
    data = json.dumps(payload).encode()
    start_headers = [(b"content-type", b"application/json"), *headers]
    start_headers.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": start_headers})
    await send({"type": "http.response.body", "body": data})


async def _send_error(send: Any, status: int, message: str, code: str | None = None) -> None:
    kind = "rate_limit_exceeded" if status == 429 else "invalid_request_error"
    if status >= 500:
        kind = "server_error"
    error = {"message": message, "type": kind, "param": None, "code": code or kind}
    headers = ((b"retry-after", b"1"),) if status == 429 else ()
    await _send_json(send, status, {"error": error}, headers)


async def _send_sse(send: Any, chunks: Iterator[dict]) -> None:
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for chunk in chunks:
        data = b"data: " + json.dumps(chunk).encode() + b"\n\n"
        await send({"type": "http.response.body", "body": data, "more_body": True})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


async def _drop_connection(send: Any, receive: Any) -> None:
    # ASGI has no "close without answering"; uvicorn's send is bound to the request cycle,
    # which holds the transport. Waiting for http.disconnect keeps uvicorn from adding a 500.
    send.__self__.transport.close()
    while (await receive())["type"] != "http.disconnect":
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve a scripted OpenAI-compatible upstream.")
    parser.add_argument("--delay-ms", type=float, default=0)
    args = parser.parse_args()
    with ScriptedUpstream(delay_ms=args.delay_ms, record=False) as upstream:
        print(upstream.base_url, flush=True)
        sys.stdin.read()  # the parent closes our stdin to stop us


if __name__ == "__main__":
    main()
