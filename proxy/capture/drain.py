"""The capture drain: a process of its own that tails the spool into the registry.

    gateway --append--> spool segments <--tail-- drain --fsync, validate, COPY--> registry

The gateway only appends records to the open spool segment (one write per request, which
is what makes an acknowledged event survive `kill -9`). This process reads what was
appended, fsyncs it, validates each record into its ATDP model and commits it in batches,
then deletes a segment once it is closed (a newer one exists) and wholly committed.
Running it in its own process keeps its work, validation and the database driver's
included, off the gateway's event loop and out of its GIL; nothing on the request path
waits for it or wakes it.

When the registry is unreachable it retries with backoff, the records waiting in the spool.
A record that is not valid, or that the registry refuses, goes to `rejected.jsonl` with
the reason, so one bad record never blocks the others and nothing is silently dropped.
Segments left behind by an earlier run are committed first; writes are idempotent by id,
so a record committed twice (a crash between commit and delete) is stored once.

A gateway starts its drain through `proxy.capture.zygote`. They share a few counters in a
memory-mapped file, written only by the drain, and a pipe: the gateway writes "flush" to
cut a wait short and "stop" once it has closed the spool; end-of-file means the gateway is
gone, and the drain exits with it.
"""

from __future__ import annotations

import ctypes
import json
import logging
import mmap
import os
import select
from dataclasses import asdict, dataclass
from datetime import date
from enum import IntEnum
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from atdp import utcnow
from proxy.capture.records import CaptureRecord, commit_records
from proxy.capture.spool import SUFFIX
from registry import RegistryError, SessionRoute, create_db_engine, is_unreachable
from registry.partitions import ensure_partitions

__all__ = ["Drain", "DrainSettings", "Progress", "SharedProgress"]

log = logging.getLogger(__name__)

ERROR_BYTES = 512  # room for the last error message in shared memory


class Progress(IntEnum):
    """Slots of the shared counters the drain publishes (int64 each)."""

    COMMITTED = 0
    REJECTED = 1
    RETRIES = 2
    LEFTOVER = 3  # records found in segments an earlier run left behind
    SCANNED = 4  # 1 once every leftover segment has been read
    DONE = 5  # 1 once the drain has exited


class SharedProgress:
    """The drain's counters and last error, in a memory-mapped file both processes map."""

    SIZE = 8 * len(Progress) + ERROR_BYTES

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, self.SIZE)
        self.counters = (ctypes.c_int64 * len(Progress)).from_buffer(self._map)
        self._error = (ctypes.c_char * ERROR_BYTES).from_buffer(self._map, 8 * len(Progress))

    @property
    def error(self) -> str | None:
        return self._error.value.decode(errors="replace") or None

    @error.setter
    def error(self, message: str) -> None:
        self._error.value = message.encode()[: ERROR_BYTES - 1]


@dataclass(frozen=True)
class DrainSettings:
    database_url: str
    directory: str
    first_segment: int  # the gateway's first segment in this run: older ones are leftovers
    batch_size: int = 500
    flush_interval: float = 0.2
    max_backoff: float = 5.0
    # Below the gateway's priority: capture is background work, serving comes first. It
    # catches up whenever the machine has a moment; meanwhile records wait in the spool.
    niceness: int = 10

    def to_json(self) -> str:
        return json.dumps(asdict(self))


class _GatewayGone(Exception):
    """The gateway closed its end of the control pipe: exit without finishing."""


class _Segment:
    """A spool segment read as it grows: complete lines only, from where the last read ended."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)
        self._tail = b""

    def new_lines(self) -> list[bytes]:
        chunks = []
        while chunk := os.read(self.fd, 1 << 20):
            chunks.append(chunk)
        if not chunks:
            return []
        *lines, self._tail = (self._tail + b"".join(chunks)).split(b"\n")
        return lines

    def close(self) -> bytes:
        """Close; returns a torn last line, if a crash cut one short."""
        os.close(self.fd)
        return self._tail


class Drain:
    """Tails one gateway's spool into the registry until the gateway says "stop" (or dies).

    Args:
        control: the read end of the gateway's pipe ("flush", "stop"; end-of-file: gone).
        shared: where the counters are published.
        placements: the write end of a pipe to the gateway: session placements that lost
            to an earlier one, as JSON lines of the route in force.
    """

    def __init__(
        self, settings: DrainSettings, control: int, shared: SharedProgress, placements: int
    ) -> None:
        self.settings = settings
        self.directory = Path(settings.directory)
        self.control = control
        self.placements = placements  # where lost placements go back to the gateway
        self.shared = shared
        self.progress = shared.counters
        self.engine = create_db_engine(settings.database_url)
        self.open: dict[int, _Segment] = {}
        self.stopping = False
        self.partitions_checked: date | None = None  # the day partitions were last ensured

    def run(self) -> None:
        try:
            self._leftovers()
            while True:
                stopping = self.stopping
                self._drain(closed_all=stopping)
                if stopping:
                    return
                self._wait(self.settings.flush_interval)
        except _GatewayGone:
            log.info("the gateway is gone; its spool is replayed when it restarts")
        finally:
            for segment in self.open.values():
                segment.close()
            os.close(self.placements)
            self.engine.dispose()
            self.progress[Progress.DONE] = 1

    # --- reading the spool --------------------------------------------------------------

    def _numbers(self) -> list[int]:
        names = (path.stem for path in self.directory.glob(f"*{SUFFIX}"))
        return sorted(int(name) for name in names if name.isdigit())

    def _leftovers(self) -> None:
        """Commit what earlier runs left behind, counting it before committing any of it."""
        for number in self._numbers():
            if number >= self.settings.first_segment:
                break
            records, set_aside = self._read(number)
            self.progress[Progress.LEFTOVER] += len(records) + set_aside
            self._commit(records)
            self._retire(number)
        self.progress[Progress.SCANNED] = 1

    def _drain(self, *, closed_all: bool) -> None:
        """Commit everything appended since the last call; delete closed, committed segments.

        A segment is closed once a newer one exists, or, with `closed_all`, when the gateway
        has closed the spool (it is stopping).
        """
        numbers = self._numbers()
        for number in numbers:
            self._commit(self._read(number)[0])
            if closed_all or number != numbers[-1]:
                self._retire(number)

    def _read(self, number: int) -> tuple[list[CaptureRecord], int]:
        """The records appended to a segment since the last read, and how many lines were
        not records (set aside)."""
        segment = self.open.get(number)
        if segment is None:
            path = self.directory / f"{number:012d}{SUFFIX}"
            try:
                segment = self.open[number] = _Segment(path)
            except FileNotFoundError:  # another drain (a restart's overlap) finished it
                return [], 0
        records, set_aside = [], 0
        for line in segment.new_lines():
            try:
                records.append(CaptureRecord.from_line(line))
            except ValueError as error:  # orjson's decode error is one too
                self._set_aside({"line": line.decode(errors="replace")}, error)
                set_aside += 1
        if records:  # durable before the registry has it, so the spool stays the truth
            os.fsync(segment.fd)
        return records, set_aside

    def _retire(self, number: int) -> None:
        segment = self.open.pop(number, None)
        if segment is not None and segment.close():
            log.warning("spool segment %d ends with a torn record (a crash mid-write)", number)
        (self.directory / f"{number:012d}{SUFFIX}").unlink(missing_ok=True)

    # --- writing the registry -----------------------------------------------------------

    def _commit(self, records: list[CaptureRecord]) -> None:
        if records:
            self._keep_partitions_ahead()
        size = self.settings.batch_size
        for start in range(0, len(records), size):
            self._commit_with_retry(records[start : start + size])

    def _keep_partitions_ahead(self) -> None:
        """Once a day, make sure the registry has its day partitions a week ahead
        (`registry.partitions`; a no-op on SQLite). Until it has, rows go to the default
        partition, which the next creation moves them out of."""
        today = utcnow().date()
        if self.partitions_checked == today:
            return
        try:
            created = ensure_partitions(self.engine, utcnow())
        except Exception as error:  # noqa: BLE001 - the commit that follows reports it
            log.warning("could not create the registry's day partitions: %s", error)
            return
        if created:
            log.info("created registry partitions: %s", ", ".join(created))
        self.partitions_checked = today

    def _commit_with_retry(self, records: list[CaptureRecord]) -> None:
        backoff = 0.05
        while True:
            try:
                self._report(commit_records(self.engine, records))
                self.progress[Progress.COMMITTED] += len(records)
                return
            except Exception as error:  # noqa: BLE001 - classified below
                if not is_unreachable(error):
                    self._commit_one_by_one(records)
                    return
                self.progress[Progress.RETRIES] += 1
                self.shared.error = f"{type(error).__name__}: {str(error).splitlines()[0]}"
                log.warning("registry unreachable, retrying capture batch: %s", error)
                self._wait(backoff)
                backoff = min(backoff * 2, self.settings.max_backoff)

    def _commit_one_by_one(self, records: list[CaptureRecord]) -> None:
        """Isolate the record(s) the registry refuses; commit the rest."""
        for record in records:
            try:
                self._report(commit_records(self.engine, [record]))
                self.progress[Progress.COMMITTED] += 1
            except (RegistryError, sa.exc.IntegrityError, ValueError) as error:
                self._reject(record, error)
            except Exception as error:  # noqa: BLE001
                if not is_unreachable(error):
                    self._reject(record, error)
                else:
                    self._commit_with_retry([record])

    def _report(self, lost: list[SessionRoute]) -> None:
        """Tell the gateway which sessions to serve as placed before (rare: two gateways, or
        a restart, placing one session differently)."""
        for route in lost:
            try:
                os.write(self.placements, route.model_dump_json().encode() + b"\n")
            except BlockingIOError:  # the gateway is not reading: it keeps its own placement
                log.warning("could not hand back the placement of session %s", route.session)
            except OSError:  # the gateway is gone
                return

    def _reject(self, record: CaptureRecord, error: Exception) -> None:
        try:
            data = json.loads(record.document)
        except ValueError:  # not even JSON: kept as the text it is
            data = record.document
        self._set_aside({"kind": record.kind, "data": data}, error)

    def _set_aside(self, line: dict[str, Any], error: Exception) -> None:
        line = {"error": f"{type(error).__name__}: {error}", **line}
        with (self.directory / "rejected.jsonl").open("a") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        self.progress[Progress.REJECTED] += 1
        log.error("capture record rejected: %s", line["error"])

    # --- the gateway's signals ----------------------------------------------------------

    def _wait(self, seconds: float) -> None:
        """Sleep up to `seconds`, less if the gateway asks for a flush or a stop."""
        readable, _, _ = select.select([self.control], [], [], seconds)
        if not readable:
            return
        messages = os.read(self.control, 4096)  # everything waiting: none pile up
        if not messages:
            raise _GatewayGone
        if b"stop" in messages:
            self.stopping = True
