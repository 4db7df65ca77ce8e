"""Starts a real SGLang server for the GPU tests, in its own process group, and stops it.

In production SGLang runs as its own service (deploy/compose.yaml's `sglang`,
deploy/k8s/sglang.yaml), started by its image's `python3 -m sglang.launch_server`; the
gateway and workers only talk to it (`proxy.engines.sglang`, `proxy.engines.sglang_admin`).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from proxy.process_group import signal_group, wait_for_group_to_end

__all__ = ["SGLangServer", "launch_sglang"]


@dataclass
class SGLangServer:
    """An SGLang server process started by `launch_sglang`, leader of its own process group."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    @property
    def base_url(self) -> str:
        """The OpenAI API root, for SGLangEngine or any OpenAI client."""
        return f"{self.url}/v1"

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_healthy(self, timeout: float) -> None:
        """Return once GET /health answers 200; raise if the process exits or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"SGLang exited with code {code} before it was healthy; the end of "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            if _healthy(self.url):
                return
            time.sleep(1.0)
        raise TimeoutError(
            f"SGLang at {self.url} was not healthy within {timeout} s; the end of "
            f"{self.log_path}:\n{self.log_tail()}"
        )

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the process group (SGLang's scheduler and detokenizer too), then SIGKILL."""
        signal_group(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        signal_group(self.process.pid, signal.SIGKILL)  # children the leader left behind
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        # A SIGKILLed child is gone only once the kernel has run the kill: until then it
        # still holds its GPU memory, which the next server on that GPU needs.
        wait_for_group_to_end(self.process.pid, timeout=10)

    def __enter__(self) -> SGLangServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def launch_sglang(
    model_path: str | Path,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    weight_version: str | None = None,
    args: Sequence[str] = (),
    log_path: str | Path | None = None,
    startup_timeout: float = 900.0,
    env: dict[str, str] | None = None,
) -> SGLangServer:
    """Start `python -m sglang.launch_server` in its own process group; return once healthy.

    Args:
        model_path: a local HF checkpoint directory.
        port: a free one is chosen when None.
        weight_version: the label SGLang reports for the initial weights (else "default").
        args: more launch_server flags, e.g. ["--mem-fraction-static", "0.1"].
        log_path: where the server's stdout and stderr go (a temporary file when None).
    """
    if importlib.util.find_spec("sglang") is None:
        raise RuntimeError(
            "sglang is not installed; install the GPU extra: pip install -e '.[gpu]'"
        )
    port = port or _free_port(host)
    log = Path(log_path) if log_path else Path(tempfile.mkdtemp(prefix="sglang-")) / "server.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model_path)]
    command += ["--host", host, "--port", str(port)]
    if weight_version:
        command += ["--weight-version", weight_version]
    with log.open("ab") as output:
        process = subprocess.Popen(
            [*command, *args],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # its own process group, so stop() reaches its children
        )
    reachable = "127.0.0.1" if host in {"0.0.0.0", ""} else host
    server = SGLangServer(process, f"http://{reachable}:{port}", log)
    try:
        server.wait_healthy(startup_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=5.0).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host if host != "" else "0.0.0.0", 0))
        return probe.getsockname()[1]
