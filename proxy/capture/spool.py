"""An append-only local spool: capture records survive a crash or a database outage.

Records are JSON lines in numbered segment files. `append` writes straight to the file
descriptor (no user-space buffer), so once it returns a `kill -9` of the gateway cannot
lose the record. The capture drain (`proxy.capture.drain`) tails the segments, fsyncs
what it reads before committing it, so a power loss costs at most one drain interval, and
deletes a segment once a newer one exists and every record in it is committed. At
start-up, segments left behind are replayed (writes are idempotent by id, so replaying
twice is harmless).
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["SUFFIX", "Spool", "claim_spool"]

SUFFIX = ".jsonl"

_claims: list[int] = []  # the lock files this process holds, open for its lifetime


def claim_spool(base: Path) -> Path:
    """A spool directory under `base` no other live process uses: `worker-0`, `worker-1`...,
    the first whose lock this process gets. For gateways sharing a port (`evoplane gateway
    --workers N`): each has a spool of its own, and one that restarts after a crash takes
    over a dead one's directory, so what was spooled there is committed."""
    for number in range(10_000):
        directory = base / f"worker-{number}"
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _claims.append(fd)
        return directory
    raise RuntimeError(f"no free spool directory under {base}")


class Spool:
    """Numbered segment files in `directory`; one is open for appending at a time.

    Args:
        segment_bytes: rotate to a new segment once the open one grows past this size.
    """

    def __init__(self, directory: Path, *, segment_bytes: int = 4 * 2**20) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.segment_bytes = segment_bytes
        self._lock = threading.Lock()
        existing = self.segments()
        self._number = (existing[-1] + 1) if existing else 1
        self._fd = self._open(self._number)
        self._size = 0

    def _path(self, number: int) -> Path:
        return self.directory / f"{number:012d}{SUFFIX}"

    def _open(self, number: int) -> int:
        return os.open(self._path(number), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def segments(self) -> list[int]:
        """Segment numbers on disk, oldest first (including the open one)."""
        return sorted(int(p.stem) for p in self.directory.glob(f"*{SUFFIX}") if p.stem.isdigit())

    @property
    def current(self) -> int:
        return self._number

    def append(self, records: list[dict[str, Any]]) -> int:
        """Write records as one contiguous block; returns the segment they went to."""
        return self.append_lines(
            [json.dumps(r, separators=(",", ":"), ensure_ascii=False) for r in records]
        )

    def append_lines(self, lines: list[str]) -> int:
        """Like `append`, for records already serialised (one JSON document per line)."""
        payload = ("\n".join(lines) + "\n").encode()
        with self._lock:
            if self._size and self._size + len(payload) > self.segment_bytes:
                self._rotate()
            written = 0
            while written < len(payload):  # os.write may write less than asked
                written += os.write(self._fd, payload[written:])
            self._size += len(payload)
            return self._number

    def _rotate(self) -> None:
        # Not fsynced here: a request that happens to rotate must not wait on the disk. The
        # drain fsyncs every segment it reads before committing from it.
        os.close(self._fd)
        self._number += 1
        self._fd = self._open(self._number)
        self._size = 0

    def rotate(self) -> int:
        """Close the open segment (if it has data) and start a new one; returns the closed one."""
        with self._lock:
            closed = self._number
            if self._size:
                self._rotate()
            return closed

    def sync(self) -> None:
        with self._lock:
            os.fsync(self._fd)

    def read(self, number: int) -> Iterator[dict[str, Any]]:
        """The records of a segment; a torn last line (a crash mid-write) is skipped."""
        with self._path(number).open("rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    return
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue

    def delete(self, number: int) -> None:
        with self._lock:
            if number == self._number:
                raise ValueError("the open segment cannot be deleted; rotate first")
            self._path(number).unlink(missing_ok=True)

    def close(self) -> None:
        with self._lock:
            os.fsync(self._fd)
            os.close(self._fd)
            if not self._size:
                self._path(self._number).unlink(missing_ok=True)
