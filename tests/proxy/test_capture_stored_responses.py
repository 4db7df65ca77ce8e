"""Stored responses travel the capture path: spool, drain, registry, like the ATDP records."""

from __future__ import annotations

import json
import shutil
import uuid

import pytest

from atdp import utcnow
from proxy.capture import CaptureRecord, CaptureWriter, Spool
from registry import (
    NotFoundError,
    StoredResponse,
    delete_stored_response,
    get_events,
    get_stored_response,
    transaction,
)
from tests.registry.helpers import event, seed_world, trajectory


def stored_response(llm_call, document: str) -> dict:
    """A response as the gateway hands it over per request: its JSON-shaped document."""
    return {
        "id": f"resp_{uuid.uuid4().hex}",
        "tenant": "acme",
        "agent": "support-bot",
        "session": "s-1",
        "trajectory_id": str(llm_call.trajectory_id),
        "event_id": str(llm_call.id),
        "previous_id": None,
        "document": document,
        "sealed": False,
        "created_at": utcnow().isoformat(),
        "expires_at": None,
    }


def test_a_stored_response_is_committed_with_its_event_and_a_bad_one_set_aside(
    engine, tmp_path
) -> None:
    seed_world(engine)
    t = trajectory("acme")
    llm_call = event(t, 0)
    good = stored_response(llm_call, '{"output_text": "hi"}')
    bad = stored_response(llm_call, '{"output_text": "a\x00b"}')  # PostgreSQL cannot hold it
    writer = CaptureWriter(engine, Spool(tmp_path / "spool"), flush_interval=0.01)
    writer.start()
    writer.submit(
        [
            CaptureRecord("trajectory", t),
            CaptureRecord("event", llm_call),
            CaptureRecord("stored_response", good),
            CaptureRecord("stored_response", bad),
        ]
    )
    assert writer.flush(10)
    writer.stop()
    with transaction(engine) as session:
        assert len(get_events(session, "acme", t.id)) == 1
        stored = get_stored_response(session, "acme", good["id"])
        assert stored == StoredResponse.model_validate(good)
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", bad["id"])
    rejected = [
        json.loads(line)
        for line in (tmp_path / "spool" / "rejected.jsonl").read_text().splitlines()
    ]
    assert [(r["kind"], r["data"]["id"]) for r in rejected] == [("stored_response", bad["id"])]
    assert "NUL" in rejected[0]["error"]
    assert (writer.stats.committed, writer.stats.rejected) == (3, 1)


def test_a_replayed_spool_does_not_bring_back_a_deleted_response(engine, tmp_path) -> None:
    seed_world(engine)
    record = CaptureRecord("stored_response", stored_response(event(trajectory("acme"), 0), "{}"))
    crashed = CaptureWriter(engine, Spool(tmp_path / "spool"))
    crashed.submit([record])  # spooled; kept aside below as a segment a crash left behind
    (segment,) = sorted((tmp_path / "spool").glob("*.jsonl"))
    shutil.copy(segment, tmp_path / "left-behind.jsonl")

    first = CaptureWriter(engine, Spool(tmp_path / "spool"))
    first.start()
    first.stop()
    with transaction(engine) as session:
        assert delete_stored_response(session, "acme", record.item["id"])

    shutil.copy(tmp_path / "left-behind.jsonl", tmp_path / "spool" / "000000000000.jsonl")
    restarted = CaptureWriter(engine, Spool(tmp_path / "spool"))
    restarted.start()
    restarted.stop()
    assert restarted.stats.committed == 1
    with transaction(engine) as session, pytest.raises(NotFoundError):
        get_stored_response(session, "acme", record.item["id"])
