"""The gateway's HTTP protocol: a response's head goes out with its body in one write, and a
response whose body comes later still gets its head out at once."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import uvicorn

from proxy.http_protocol import CoalescingHttpProtocol

GET = b"GET /%s HTTP/1.1\r\nHost: test\r\n\r\n"


class _Served:
    """A uvicorn server with the gateway's protocol, on a loopback port."""

    def __init__(self, app) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = uvicorn.Config(
            app, port=self.port, http=CoalescingHttpProtocol, log_config=None, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> socket.socket:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        self.client = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return self.client

    def __exit__(self, *exc) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(10)


def _app(body_sent: threading.Event | None = None):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        if scope["path"] == "/later":  # the body waits until the client has read the head
            await asyncio.to_thread(body_sent.wait, 10)
        await send({"type": "http.response.body", "body": b"the body"})

    return app


def test_a_response_at_once_arrives_in_one_piece_and_keeps_the_connection():
    with _Served(_app()) as client:
        for path in (b"now", b"again"):
            client.sendall(GET % path)
            received = client.recv(65536)
            assert received.startswith(b"HTTP/1.1 200 OK\r\n")
            assert received.endswith(b"\r\n0\r\n\r\n") or received.endswith(b"the body")
            assert b"the body" in received


def test_a_head_whose_body_comes_later_is_not_held_back():
    sent = threading.Event()
    with _Served(_app(sent)) as client:
        client.sendall(GET % b"later")
        head = client.recv(65536)
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"the body" not in head
        sent.set()
        rest = b""
        while b"0\r\n\r\n" not in rest:
            rest += client.recv(65536)
        assert b"the body" in rest


class _Recording:
    """The transport's side of the writes: what reached the socket, write by write."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def test_the_head_goes_out_with_the_next_write_or_at_the_end_of_the_loop_turn():
    from proxy.http_protocol import _HeadHolding

    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"

    async def writes() -> tuple[list[bytes], list[bytes], list[bytes]]:
        loop = asyncio.get_running_loop()
        together, alone, closing = _Recording(), _Recording(), _Recording()
        for transport, then in ((together, b"ok"), (alone, None), (closing, None)):
            holding = _HeadHolding(transport, loop)
            holding.write(head)
            assert transport.writes == []
            if then is not None:
                holding.write(then)
            if transport is closing:
                holding.close()
        await asyncio.sleep(0)
        return together.writes, alone.writes, closing.writes

    together, alone, closing = asyncio.run(writes())
    assert together == [head + b"ok"]
    assert alone == [head]
    assert closing == [head]
