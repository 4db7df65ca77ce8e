"""The capture writer: spool first, then batched, idempotent writes to the registry.

    request handler --submit()--> spool (write) + queue --thread--> fsync, one transaction per batch

The request path only appends to the spool file and a queue. A background thread groups
records into batches, fsyncs the spool once per batch, and commits each batch in one
transaction. When the database is unreachable it keeps retrying with backoff while the
gateway keeps serving; records stay in the spool until committed. A record the registry
refuses (not a transient failure) goes to `rejected.jsonl` with the reason, so one bad
record never blocks the others and nothing is silently dropped.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from atdp import Event, Reward, Trajectory
from proxy.capture.spool import Spool
from registry import (
    RegistryError,
    SealedEvent,
    TrajectoryEnd,
    is_unreachable,
    transaction,
    write_batch,
)

__all__ = ["CaptureRecord", "CaptureWriter", "WriterStats"]

log = logging.getLogger(__name__)

RecordKind = Literal["trajectory", "event", "reward", "sealed", "trajectory_end"]
_MODELS: dict[str, type] = {
    "trajectory": Trajectory,
    "event": Event,
    "reward": Reward,
    "sealed": SealedEvent,
    "trajectory_end": TrajectoryEnd,
}


@dataclass(frozen=True)
class CaptureRecord:
    """One record to persist, serialised once: the same JSON goes to the spool and the DB."""

    kind: RecordKind
    item: Trajectory | Event | Reward | SealedEvent | TrajectoryEnd

    @cached_property
    def document(self) -> str:
        return self.item.model_dump_json()

    def spool_line(self) -> str:
        return f'{{"kind":"{self.kind}","data":{self.document}}}'

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CaptureRecord:
        return cls(record["kind"], _MODELS[record["kind"]].model_validate(record["data"]))


@dataclass
class WriterStats:
    submitted: int = 0
    committed: int = 0
    rejected: int = 0
    retries: int = 0
    last_error: str | None = None
    by_kind: Counter = field(default_factory=Counter)


def commit_records(engine: Engine, records: list[CaptureRecord]) -> None:
    """Write one batch in one transaction: trajectories, then events, then rewards."""
    events = [r for r in records if r.kind == "event"]
    with transaction(engine) as session:
        write_batch(
            session,
            [r.item for r in records if r.kind == "trajectory"],
            [r.item for r in events],
            [r.item for r in records if r.kind == "reward"],
            event_documents=[r.document for r in events],
            sealed=[r.item for r in records if r.kind == "sealed"],
            endings=[r.item for r in records if r.kind == "trajectory_end"],
        )


def _transient(error: Exception) -> bool:
    """A failure worth retrying: the database was unreachable or the connection broke."""
    return is_unreachable(error)


class CaptureWriter:
    """Owns the spool and the background thread that drains it into the registry."""

    def __init__(
        self,
        engine: Engine,
        spool: Spool,
        *,
        batch_size: int = 500,
        flush_interval: float = 0.05,
        max_backoff: float = 5.0,
    ) -> None:
        self.engine, self.spool = engine, spool
        self.batch_size, self.flush_interval, self.max_backoff = (
            batch_size,
            flush_interval,
            max_backoff,
        )
        self.stats = WriterStats()
        self._queue: queue.Queue[tuple[int, list[CaptureRecord]] | None] = queue.Queue()
        self._appended: Counter[int] = Counter()
        self._committed: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._idle = threading.Condition()

    # --- request path -------------------------------------------------------------------

    def submit(self, records: list[CaptureRecord]) -> None:
        """Persist to the spool now (survives kill -9) and queue for the database."""
        if not records:
            return
        segment = self.spool.append_lines([r.spool_line() for r in records])
        with self._lock:
            self._appended[segment] += len(records)
            self.stats.submitted += len(records)
        self._queue.put((segment, records))

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Replay segments a previous run left behind, then start draining new records."""
        self.replay_leftovers()
        self._thread = threading.Thread(target=self._run, name="capture-writer", daemon=True)
        self._thread.start()

    def replay_leftovers(self) -> int:
        """Commit every record of segments older than the open one, then delete them."""
        replayed = 0
        for number in self.spool.segments():
            if number == self.spool.current:
                continue
            records = [CaptureRecord.from_json(r) for r in self.spool.read(number)]
            with self._lock:
                self.stats.submitted += len(records)
            for start in range(0, len(records), self.batch_size):
                self._commit_with_retry(records[start : start + self.batch_size])
            replayed += len(records)
            self.spool.delete(number)
            log.info("replayed %d capture records from spool segment %d", len(records), number)
        return replayed

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until everything submitted so far is committed (or rejected)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self.pending > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._idle.wait(min(remaining, 0.1))
        return True

    @property
    def pending(self) -> int:
        with self._lock:
            return self.stats.submitted - self.stats.committed - self.stats.rejected

    def stop(self, timeout: float = 30.0) -> None:
        """Drain what is queued (bounded by `timeout`), then close the spool."""
        if self._thread is not None:
            self.flush(timeout)
            self._queue.put(None)
            self._thread.join(timeout)
            self._thread = None
        self.spool.close()

    # --- background thread --------------------------------------------------------------

    def _next_batch(self) -> tuple[list[tuple[int, list[CaptureRecord]]], bool]:
        first = self._queue.get()
        if first is None:
            return [], True
        batch, size, stop = [first], len(first[1]), False
        deadline = time.monotonic() + self.flush_interval
        while size < self.batch_size:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                stop = True
                break
            batch.append(item)
            size += len(item[1])
        return batch, stop

    def _run(self) -> None:
        while True:
            batch, stop = self._next_batch()
            if batch:
                self.spool.sync()
                self._commit_with_retry([r for _, records in batch for r in records])
                self._account(batch)
            if stop:
                return

    def _commit_with_retry(self, records: list[CaptureRecord]) -> None:
        backoff = 0.05
        while True:
            try:
                commit_records(self.engine, records)
                self._count(records, committed=True)
                return
            except Exception as error:  # noqa: BLE001 - classified below
                if not _transient(error):
                    self._commit_one_by_one(records)
                    return
                self.stats.retries += 1
                self.stats.last_error = f"{type(error).__name__}: {str(error).splitlines()[0]}"
                log.warning(
                    "registry unreachable, retrying capture batch: %s", self.stats.last_error
                )
                time.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)

    def _commit_one_by_one(self, records: list[CaptureRecord]) -> None:
        """Isolate the record(s) the registry refuses; commit the rest."""
        for record in records:
            try:
                commit_records(self.engine, [record])
                self._count([record], committed=True)
            except (RegistryError, sa.exc.IntegrityError, ValueError) as error:
                self._reject(record, error)
            except Exception as error:  # noqa: BLE001
                if not _transient(error):
                    self._reject(record, error)
                else:
                    self._commit_with_retry([record])

    def _reject(self, record: CaptureRecord, error: Exception) -> None:
        line = {
            "error": f"{type(error).__name__}: {error}",
            "kind": record.kind,
            "data": json.loads(record.document),
        }
        with (self.spool.directory / "rejected.jsonl").open("a") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")
        self._count([record], committed=False)
        log.error("capture record rejected by the registry: %s", line["error"])

    def _count(self, records: list[CaptureRecord], *, committed: bool) -> None:
        with self._lock:
            if committed:
                self.stats.committed += len(records)
                self.stats.by_kind.update(r.kind for r in records)
            else:
                self.stats.rejected += len(records)

    def _account(self, batch: list[tuple[int, list[CaptureRecord]]]) -> None:
        """Delete closed segments whose records are all in the registry."""
        with self._lock:
            for segment, records in batch:
                self._committed[segment] += len(records)
            done = [
                s
                for s, n in self._appended.items()
                if s != self.spool.current and self._committed[s] >= n
            ]
            for segment in done:
                del self._appended[segment], self._committed[segment]
        for segment in done:
            self.spool.delete(segment)
        if self._queue.empty() and self.spool.current in self._appended:
            with self._lock:
                caught_up = (
                    self._committed[self.spool.current] >= self._appended[self.spool.current]
                )
            if caught_up and self._appended[self.spool.current] >= 1_000:
                self.spool.rotate()  # keep the open segment from growing without bound
        with self._idle:
            self._idle.notify_all()
