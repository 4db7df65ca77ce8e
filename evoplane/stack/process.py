"""Child processes that are started in their own process group and stopped as a group.

MLflow's server spawns workers and job consumers of its own; signalling only the
direct child would orphan them. Each service therefore gets a new session (and so a
process group) and is stopped with killpg: SIGTERM, a grace period, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from proxy.process_group import group_alive, signal_group

__all__ = ["ManagedProcess", "PortInUseError", "ensure_port_free", "tail"]

_PR_SET_PDEATHSIG = 1


class PortInUseError(RuntimeError):
    """A port a service needs is taken by another process."""


def ensure_port_free(host: str, port: int, what: str, hint: str) -> None:
    """Raise PortInUseError, naming the service and how to choose another port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise PortInUseError(
                f"port {port} on {host} ({what}) is already in use; stop the process using "
                f"it or choose another port with {hint}"
            ) from error


def _die_with_parent() -> None:
    """In the child: start a new session, and get SIGTERM if the launcher dies (Linux)."""
    os.setsid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def tail(path: Path, lines: int = 20) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class ManagedProcess:
    """One service process with its log file."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.env},
                cwd=self.cwd,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - needed for setsid + pdeathsig
            )
        finally:
            log.close()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def exited(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return None if self.process is None else self.process.poll()

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the whole group, wait up to `grace` seconds, then SIGKILL what is left."""
        if self.process is None:
            return
        pgid = self.process.pid  # setsid made the child its group's leader
        signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and group_alive(pgid):
            self.process.poll()
            time.sleep(0.1)
        if group_alive(pgid):
            signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()
