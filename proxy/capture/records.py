"""Capture records: what the gateway hands to the spool, and how a batch reaches the registry.

Besides ATDP records, the spool carries the gateway's session placements (which version and
replica a new session got), so they too are written off the request path and survive a
crash. (A stored Responses API response needs no record: its llm_call is it.)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from sqlalchemy.engine import Engine

from atdp import Event, Reward, Trajectory
from proxy import jsonio
from registry import (
    SealedEvent,
    SessionRoute,
    TrajectoryEnd,
    route_session,
    transaction,
    write_batch,
)

__all__ = ["CaptureRecord", "RecordKind", "commit_records"]

RecordKind = Literal[
    "trajectory",
    "event",
    "reward",
    "sealed",
    "trajectory_end",
    "session_route",
]
_MODELS: dict[str, type] = {
    "trajectory": Trajectory,
    "event": Event,
    "reward": Reward,
    "sealed": SealedEvent,
    "trajectory_end": TrajectoryEnd,
    "session_route": SessionRoute,
}


@dataclass(frozen=True)
class CaptureRecord:
    """One record to persist, serialised once for the spool.

    `item` is a model, or a document of one: a dict in its JSON shape (what the gateway
    builds per request), or its JSON text (what the drain reads back from the spool).
    Documents are validated into models by the capture drain, off the request path; one
    that is not valid is set aside like a record the registry refuses.
    """

    kind: RecordKind
    item: Trajectory | Event | Reward | SealedEvent | TrajectoryEnd | SessionRoute | dict | bytes

    @cached_property
    def document(self) -> str:
        if isinstance(self.item, bytes):
            return self.item.decode()
        if isinstance(self.item, dict):
            return jsonio.dumps(self.item).decode()
        return self.item.model_dump_json()

    def spool_line(self) -> str:
        return f"{_LINE_START}{self.kind}{_LINE_DATA}{self.document}}}"

    def validated(self) -> CaptureRecord:
        """The record with its item as a model (raises ValueError if it is not valid)."""
        if isinstance(self.item, bytes):
            return CaptureRecord(self.kind, _MODELS[self.kind].model_validate_json(self.item))
        if isinstance(self.item, dict):
            return CaptureRecord(self.kind, _MODELS[self.kind].model_validate(self.item))
        return self

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> CaptureRecord:
        if record.get("kind") not in _MODELS or not isinstance(record.get("data"), dict):
            raise ValueError(f"not a capture record: {str(record)[:200]}")
        return cls(record["kind"], record["data"])

    @classmethod
    def from_line(cls, line: bytes) -> CaptureRecord:
        """A record from its spool line, its document left as text: validating the text
        into a model in one step (pydantic's JSON parser) is much cheaper than parsing it
        into dicts first."""
        kind, separator, rest = line.removeprefix(_LINE_START.encode()).partition(_LINE_DATA_B)
        if separator and kind.decode() in _MODELS and rest.endswith(b"}"):
            return cls(kind.decode(), rest[:-1])
        return cls.from_json(jsonio.loads(line))  # written some other way: parse it whole


_LINE_START = '{"kind":"'
_LINE_DATA = '","data":'
_LINE_DATA_B = _LINE_DATA.encode()


def commit_records(engine: Engine, records: list[CaptureRecord]) -> list[SessionRoute]:
    """Write one batch in one transaction: placements, trajectories, events, rewards.

    Returns the placements that lost: sessions another gateway (or an earlier run) had
    placed already, with the route in force, which the gateway must adopt.
    """
    records = [record.validated() for record in records]
    events = [r for r in records if r.kind == "event"]
    lost = []
    with transaction(engine) as session:
        for proposal in (r.item for r in records if r.kind == "session_route"):
            recorded = route_session(session, proposal)
            if (recorded.version_id, recorded.replica) != (proposal.version_id, proposal.replica):
                lost.append(recorded)
        write_batch(
            session,
            [r.item for r in records if r.kind == "trajectory"],
            [r.item for r in events],
            [r.item for r in records if r.kind == "reward"],
            event_documents=[r.document for r in events],
            sealed=[r.item for r in records if r.kind == "sealed"],
            endings=[r.item for r in records if r.kind == "trajectory_end"],
        )
    return lost
