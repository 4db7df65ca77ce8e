"""Starting capture drains quickly: a zygote process forks them, already imported.

A drain needs the registry, SQLAlchemy and the ATDP models: about half a second of imports
on a small machine. The first gateway of a process starts `python -m proxy.capture.zygote`,
which imports them and configures the ORM once, then forks a drain per gateway on request.
The zygote is single threaded, so forking it is safe (forking a gateway, with its threads,
would not be), and it is a plain `python -m` child: `multiprocessing` would re-run the
parent's main script in each child, which a program embedding the gateway need not guard.

The gateway sends the drain's settings and three file descriptors (its control pipe, the
shared counters, the pipe lost placements come back on) over a Unix socket; the zygote
answers with the drain's pid.
When the gateway process ends, the zygote sees the socket close and exits; each drain sees
its own control pipe close and exits too.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading

import sqlalchemy.orm

from proxy.capture.drain import Drain, DrainSettings, SharedProgress

__all__ = ["spawn_drain"]

_lock = threading.Lock()
_zygote: tuple[subprocess.Popen, socket.socket] | None = None


def spawn_drain(settings: DrainSettings, control: int, progress: int, placements: int) -> int:
    """Start a drain for `settings` with the given descriptors; returns its pid.

    Args:
        control: the read end of the gateway's control pipe (the caller closes its copy).
        progress: the shared counters' file.
        placements: the write end of the pipe lost placements come back on (likewise).
    """
    global _zygote
    message = settings.to_json().encode()
    with _lock:
        for _attempt in range(2):
            if _zygote is None or _zygote[0].poll() is not None:
                _zygote = _start()
            process, connection = _zygote
            try:
                socket.send_fds(connection, [message], [control, progress, placements])
                reply = connection.recv(256).decode()
            except OSError:  # it died meanwhile (or hangs): start another, once
                reply = ""
            if reply:
                pid, _, why = reply.partition(" ")
                if int(pid) > 0:
                    return int(pid)
                raise RuntimeError(f"the capture drain could not be forked: {why}")
            process.kill()
            connection.close()
            _zygote = None
    raise RuntimeError("the capture drain could not be started: its zygote process exits")


def _start() -> tuple[subprocess.Popen, socket.socket]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.capture.zygote", str(theirs.fileno())],
        pass_fds=[theirs.fileno()],
    )
    theirs.close()
    ours.settimeout(60)  # its first answer waits for its imports
    return process, ours


def _serve(connection: socket.socket) -> None:
    """Fork a drain per request until the gateway process closes the socket."""
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # drains are reaped by the kernel
    while True:
        message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
        if not message:
            return
        try:
            pid = os.fork()
        except OSError as error:
            for fd in fds:
                os.close(fd)
            connection.sendall(f"-1 {error}".encode())
            continue
        if pid == 0:
            connection.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 0
            try:
                settings = DrainSettings(**json.loads(message))
                os.nice(settings.niceness)
                Drain(settings, fds[0], SharedProgress(fds[1]), fds[2]).run()
            except BaseException:  # noqa: BLE001 - the drain's last word, then exit
                logging.getLogger(__name__).exception("the capture drain failed")
                code = 1
            os._exit(code)
        for fd in fds:
            os.close(fd)
        connection.sendall(str(pid).encode())


def _prepare_drains() -> None:
    """Configure the registry's ORM mappers once, before forking, instead of in each drain's
    first commit: that commit is what another gateway waits for when the next turn of a
    session goes there. Configuring there made it 0.12 s of CPU instead of 0.02 s, and 4 to
    6 s instead of 0.5 to 1 s at the drain's niceness beside eight busy processes on two
    cores, far beyond the default `resume_wait` (1 s)."""
    sqlalchemy.orm.configure_mappers()


def main() -> None:
    # Ctrl-C reaches the whole process group: the gateway decides when its drain stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="capture drain: %(levelname)s %(message)s")
    _prepare_drains()
    _serve(socket.socket(fileno=int(sys.argv[1])))


if __name__ == "__main__":
    main()
