"""A TCP forwarder on loopback that a test can cut, to make a real server "unreachable"."""

from __future__ import annotations

import contextlib
import socket
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    """Forwards 127.0.0.1:<port> to `target`.

    Two kinds of outage, both ended by `restore()`: `cut()` drops every connection and
    refuses new ones (the server stopped); `stall()` keeps every connection open but
    forwards nothing, and holds new ones unanswered (a network partition, a paused server:
    what a client notices only by its own timeouts). After a stall, what was held flows on.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._up = threading.Event()
        self._up.set()
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up.is_set():
                client.close()  # refused while cut
                continue
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()  # a stalled server never answers a connection
        if self._closed:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            self._open |= {client, upstream}
        for source, sink in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                self._flowing.wait()
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def cut(self) -> None:
        self._up.clear()
        with self._lock:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
                connection.close()
            self._open.clear()

    def stall(self) -> None:
        self._flowing.clear()

    def restore(self) -> None:
        self._up.set()
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self.cut()
        self._listener.close()
