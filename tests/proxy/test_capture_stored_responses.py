"""A stored response travels the capture path as its llm_call: spool, drain, registry."""

from __future__ import annotations

import shutil

import pytest

from proxy.capture import CaptureRecord, CaptureWriter, Spool
from registry import (
    NotFoundError,
    delete_stored_response,
    get_events,
    get_stored_response,
    transaction,
)
from tests.registry.helpers import seed_world, trajectory
from tests.registry.test_stored_responses import llm_call, response_id


def records(call) -> list[CaptureRecord]:
    """The call's records as the gateway hands them over: documents in their JSON shape."""
    owner = trajectory("acme").model_copy(update={"id": call.trajectory_id})
    return [
        CaptureRecord("trajectory", owner),
        CaptureRecord("event", call.model_dump(mode="json", exclude_defaults=True)),
    ]


def test_a_stored_response_is_found_once_its_llm_call_is_committed(engine, tmp_path) -> None:
    seed_world(engine)
    stored, unstored = llm_call(), llm_call(store=False)
    writer = CaptureWriter(engine, Spool(tmp_path / "spool"), flush_interval=0.01)
    writer.start()
    writer.submit([*records(stored), *records(unstored)])
    assert writer.flush(10)
    writer.stop()
    with transaction(engine) as session:
        assert len(get_events(session, "acme", stored.trajectory_id)) == 1
        assert get_stored_response(session, "acme", response_id(stored)).event_id == stored.id
    assert (writer.stats.committed, writer.stats.rejected) == (4, 0)


def test_a_replayed_spool_does_not_bring_back_a_deleted_response(engine, tmp_path) -> None:
    seed_world(engine)
    call = llm_call()
    crashed = CaptureWriter(engine, Spool(tmp_path / "spool"))
    crashed.submit(records(call))  # spooled; kept aside below as a segment a crash left behind
    (segment,) = sorted((tmp_path / "spool").glob("*.jsonl"))
    shutil.copy(segment, tmp_path / "left-behind.jsonl")

    first = CaptureWriter(engine, Spool(tmp_path / "spool"))
    first.start()
    first.stop()
    with transaction(engine) as session:
        assert delete_stored_response(session, "acme", response_id(call))

    shutil.copy(tmp_path / "left-behind.jsonl", tmp_path / "spool" / "000000000000.jsonl")
    restarted = CaptureWriter(engine, Spool(tmp_path / "spool"))
    restarted.start()
    restarted.stop()
    assert restarted.stats.committed == 2
    with transaction(engine) as session, pytest.raises(NotFoundError):
        get_stored_response(session, "acme", response_id(call))
