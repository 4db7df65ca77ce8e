"""The capture writer: spool first, then a drain process writes the registry.

    request handler --submit()--> spool (one write)    drain process --tail, fsync,
                                                        validate, COPY--> registry

`submit` appends records to the spool and returns: once it has, a `kill -9` of the gateway
cannot lose them. The drain (`proxy.capture.drain`), a process of its own started by
`start`, does the rest, so the request path never waits for the database, never wakes a
thread, and never shares a GIL with the driver. (A writer thread in the gateway's process,
as before, took CPU and GIL turns from the event loop exactly when requests queued: see
"Gateway overhead after the capture rework" in benchmarks/RESULTS.md.)

Drains are forked by a zygote process that has imported them already
(`proxy.capture.zygote`), so a gateway starts its drain in milliseconds.
"""

from __future__ import annotations

import logging
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from typing import IO

from sqlalchemy.engine import Engine

from proxy.capture.drain import DrainSettings, Progress, SharedProgress
from proxy.capture.records import CaptureRecord
from proxy.capture.spool import Spool
from registry import SessionRoute

__all__ = ["CaptureWriter", "WriterStats"]

log = logging.getLogger(__name__)


@dataclass
class WriterStats:
    submitted: int = 0  # this run's records, and those found left behind by an earlier run
    committed: int = 0
    rejected: int = 0
    retries: int = 0
    last_error: str | None = None


class CaptureWriter:
    """Owns the spool and the drain process that empties it into the registry.

    Args:
        engine: the registry (the drain connects to the same URL), or its URL.
        flush_interval: how often the drain looks for new records; also the most a power
            cut can lose (it fsyncs what it reads).
    """

    def __init__(
        self,
        engine: Engine | str,
        spool: Spool,
        *,
        batch_size: int = 500,
        flush_interval: float = 0.05,
        max_backoff: float = 5.0,
    ) -> None:
        self.url = engine if isinstance(engine, str) else engine.url.render_as_string(False)
        self.spool = spool
        self.batch_size, self.flush_interval, self.max_backoff = (
            batch_size,
            flush_interval,
            max_backoff,
        )
        self._first_segment = spool.current
        self._submitted = 0
        self._progress_file, self._shared = _shared_progress()
        self._drain: int | None = None  # its pid
        self._control: int | None = None  # the write end of its control pipe
        # Session placements that lost come back here (see `lost_placements`).
        self.placements, self._placements_in = os.pipe()
        os.set_blocking(self.placements, False)
        os.set_blocking(self._placements_in, False)
        self._partial = b""

    # --- request path -------------------------------------------------------------------

    def submit(self, records: list[CaptureRecord]) -> None:
        """Persist to the spool now (survives kill -9); the drain takes it from there."""
        if not records:
            return
        lines = [r.spool_line() for r in records]
        # Counted first, so the drain can never have committed more than was submitted.
        self._submitted += len(records)
        try:
            self.spool.append_lines(lines)
        except BaseException:
            self._submitted -= len(records)
            raise

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the drain: it commits what an earlier run left behind, then follows."""
        from proxy.capture.zygote import spawn_drain

        settings = DrainSettings(
            database_url=self.url,
            directory=str(self.spool.directory),
            first_segment=self._first_segment,
            batch_size=self.batch_size,
            flush_interval=self.flush_interval,
            max_backoff=self.max_backoff,
        )
        drain_end, self._control = os.pipe()
        try:
            self._drain = spawn_drain(
                settings, drain_end, self._progress_file.fileno(), self._placements_in
            )
        finally:
            os.close(drain_end)

    def lost_placements(self) -> list[SessionRoute]:
        """Session placements the registry refused because the session had one already
        (another gateway, an earlier run), as the routes in force. Read it when
        `placements` (a descriptor) is readable."""
        data = self._partial
        while True:
            try:
                chunk = os.read(self.placements, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        *lines, self._partial = data.split(b"\n")
        return [SessionRoute.model_validate_json(line) for line in lines if line]

    def ensure_running(self) -> bool:
        """Start another drain if this one died (a bug, the kernel's OOM killer); returns
        whether it had to. Nothing is lost: what it had not committed is in the spool."""
        if self._drain is None or self._running():
            return False
        log.error("the capture drain exited unexpectedly; starting another")
        os.close(self._control)
        # The new drain takes every segment there is as left behind, and counts afresh.
        self.spool.rotate()
        self._first_segment, self._submitted = self.spool.current, 0
        self._progress_file.close()
        self._progress_file, self._shared = _shared_progress()
        self.start()
        return True

    @property
    def stats(self) -> WriterStats:
        progress = self._shared.counters
        return WriterStats(
            submitted=self._submitted + progress[Progress.LEFTOVER],
            committed=progress[Progress.COMMITTED],
            rejected=progress[Progress.REJECTED],
            retries=progress[Progress.RETRIES],
            last_error=self._shared.error,
        )

    @property
    def pending(self) -> int:
        """Records submitted (or left behind earlier) and neither committed nor rejected."""
        stats = self.stats
        return stats.submitted - stats.committed - stats.rejected

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything submitted so far is committed (or rejected)."""
        deadline = time.monotonic() + timeout
        asked = False
        while not self._shared.counters[Progress.SCANNED] or self.pending > 0:
            if not self._running():
                return False
            if not asked:
                self._send(b"flush\n")  # cut the drain's wait short
                asked = True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def stop(self, timeout: float = 30.0) -> None:
        """Close the spool, let the drain commit what is in it (bounded by `timeout`)."""
        self.spool.close()
        if self._control is not None:
            self._send(b"stop\n")
            deadline = time.monotonic() + timeout
            while self._running() and time.monotonic() < deadline:
                time.sleep(0.005)
            if self._running():  # the registry is down: the spool keeps the rest
                os.kill(self._drain, signal.SIGKILL)
            os.close(self._control)
            self._control = self._drain = None
        self._progress_file.close()
        for fd in (self.placements, self._placements_in):
            os.close(fd)

    def _running(self) -> bool:
        if self._drain is None or self._shared.counters[Progress.DONE]:
            return False
        try:
            os.kill(self._drain, 0)  # the zygote reaps its drains: a dead one is gone
        except ProcessLookupError:
            return False
        return True

    def _send(self, message: bytes) -> None:
        try:
            os.write(self._control, message)
        except OSError:  # it has exited; callers see that
            pass


def _shared_progress() -> tuple[IO[bytes], SharedProgress]:
    """An unlinked file both processes map, holding the drain's counters (`Progress`)."""
    file = tempfile.TemporaryFile()
    file.truncate(SharedProgress.SIZE)
    return file, SharedProgress(file.fileno())
