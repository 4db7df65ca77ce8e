"""Stored responses are their llm_calls: found by id, one tenant's only, gone when deleted
or expired, and a deletion survives a replayed spool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from sqlmodel import Session

from atdp import Event, EventMetadata, utcnow
from registry import (
    NotFoundError,
    delete_stored_response,
    get_stored_response,
    purge_expired,
    transaction,
    write_batch,
)
from registry.tables import EventRow
from registry.types import UTCDateTime
from tests.registry.helpers import event, seed_world, trajectory


@pytest.fixture
def world(engine):
    """A registry with tenants acme and globex, both granted the agent support-bot."""
    seed_world(engine)
    return engine


def llm_call(
    tenant: str = "acme",
    response_id: str | None = None,
    expires_at: datetime | None = None,
    store: bool = True,
) -> Event:
    """An llm_call (in a trajectory of its own) that stored the response `response_id`."""
    extra: dict = {"answer_key": "k"}
    if store:
        extra["stored_response"] = {
            "id": response_id or f"resp_{uuid.uuid4().hex}",
            "created_at": 1_700_000_000,
            "expires_at": expires_at.isoformat() if expires_at else None,
        }
    call = event(trajectory(tenant), 0)
    return call.model_copy(
        update={"metadata": EventMetadata(tenant=tenant, session="s-1", extra=extra)}
    )


def record(session: Session, *calls: Event) -> None:
    """Write calls as the capture drain does (COPY on PostgreSQL)."""
    trajectories = [
        trajectory(c.metadata.tenant).model_copy(update={"id": c.trajectory_id}) for c in calls
    ]
    write_batch(session, trajectories, list(calls), [])


def response_id(call: Event) -> str:
    return call.metadata.extra["stored_response"]["id"]


def test_a_response_is_read_from_the_llm_call_that_stored_it(world) -> None:
    stored, unstored = llm_call(), llm_call(store=False)
    with transaction(world) as session:
        record(session, stored, unstored)
    with transaction(world) as session:
        found = get_stored_response(session, "acme", response_id(stored))
    assert found.event_id == stored.id and found.sealed is None and found.expires_at is None
    assert found.event["metadata"]["extra"] == stored.metadata.extra
    with transaction(world) as session:  # a call that stored nothing is not indexed
        named = session.scalars(sa.select(EventRow.id).where(EventRow.response_id.is_not(None)))
        assert list(named) == [stored.id]


def test_another_tenant_can_neither_read_nor_delete_a_response(world) -> None:
    acme = llm_call("acme")
    with transaction(world) as session:
        record(session, acme)
    with transaction(world) as session:
        with pytest.raises(NotFoundError, match=response_id(acme)):
            get_stored_response(session, "globex", response_id(acme))
        assert delete_stored_response(session, "globex", response_id(acme)) is False
        assert get_stored_response(session, "acme", response_id(acme)).event_id == acme.id


def test_the_same_id_in_two_tenants_is_two_responses(world) -> None:
    acme = llm_call("acme")
    globex = llm_call("globex", response_id(acme))
    with transaction(world) as session:
        record(session, acme, globex)
    with transaction(world) as session:
        assert get_stored_response(session, "acme", response_id(acme)).event_id == acme.id
        assert get_stored_response(session, "globex", response_id(acme)).event_id == globex.id
        assert delete_stored_response(session, "acme", response_id(acme))
        assert get_stored_response(session, "globex", response_id(acme)).event_id == globex.id


def test_an_expired_response_is_not_found(world) -> None:
    now = utcnow()
    expired = llm_call(expires_at=now - timedelta(seconds=1))
    expiring = llm_call(expires_at=now + timedelta(days=1))
    with transaction(world) as session:
        record(session, expired, expiring)
    with transaction(world) as session:
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", response_id(expired), now=now)
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", response_id(expiring), now=now + timedelta(days=1))
        earlier = now - timedelta(minutes=1)
        assert get_stored_response(session, "acme", response_id(expired), now=earlier)
        assert delete_stored_response(session, "acme", response_id(expired)) is False
        found = get_stored_response(session, "acme", response_id(expiring), now=now)
    assert found.expires_at == datetime.fromisoformat(
        expiring.metadata.extra["stored_response"]["expires_at"]
    )


def test_a_deleted_response_is_gone_and_a_replay_does_not_bring_it_back(world) -> None:
    stored = llm_call(expires_at=utcnow() + timedelta(days=1))
    with transaction(world) as session:
        record(session, stored)
    with transaction(world) as session:
        assert delete_stored_response(session, "acme", response_id(stored)) is True
    with transaction(world) as session:
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", response_id(stored))
        assert delete_stored_response(session, "acme", response_id(stored)) is False
        record(session, stored)  # the capture spool replayed
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", response_id(stored))
    expiry = datetime.fromisoformat(stored.metadata.extra["stored_response"]["expires_at"])
    with transaction(world) as session:  # the tombstone goes when the response would have
        assert purge_expired(session, expiry - timedelta(seconds=1))["tombstones"] == 0
        assert purge_expired(session, expiry)["tombstones"] == 1


def test_an_id_that_no_response_could_have_is_not_indexed(world) -> None:
    odd = llm_call(response_id="resp_" + "x" * 300)
    with transaction(world) as session:
        record(session, odd)
    with transaction(world) as session, pytest.raises(NotFoundError):
        get_stored_response(session, "acme", response_id(odd))


def test_gc_reports_the_tombstones_it_purged(world, database_url) -> None:
    stored = llm_call(expires_at=utcnow() + timedelta(seconds=1))
    with transaction(world) as session:
        record(session, stored)
    with transaction(world) as session:
        assert delete_stored_response(session, "acme", response_id(stored))
    expiry = datetime.fromisoformat(stored.metadata.extra["stored_response"]["expires_at"])
    time.sleep(max(0.0, (expiry - utcnow()).total_seconds()) + 0.01)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "evoplane"), "gc"],
        env={
            "EVOPLANE_DATABASE_URL": database_url,
            "PATH": "/usr/bin:/bin",
            # the code under test, where it is not the installed package (a worktree)
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    purged = "purged 0 events, 0 rewards, 0 trajectories, 1 tombstones of deleted responses"
    assert purged in result.stderr


_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
_OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
_TIMES = st.datetimes(datetime(1970, 1, 1), datetime(2100, 1, 1), timezones=_OFFSETS)


@given(
    id=_TEXT.filter(lambda s: 1 <= len(s) <= 200),
    expires_at=st.none() | _TIMES,
)
def test_a_stored_response_reads_back_by_any_id(world, id, expires_at) -> None:
    now = datetime(1969, 12, 30, tzinfo=UTC)
    call = llm_call(response_id=id, expires_at=expires_at)
    with Session(world) as session:  # never committed: each example starts empty
        record(session, call)
        found = get_stored_response(session, "acme", id, now=now)
    assert found.event_id == call.id and found.expires_at == expires_at


def test_the_migration_carries_stored_responses_over_to_their_llm_calls(database_url) -> None:
    """0006: a live stored response marks its llm_call; a deleted one leaves its tombstone."""
    from registry import create_db_engine, upgrade
    from registry.trajectories import _event_row, record_trajectory

    engine = create_db_engine(database_url)
    upgrade(engine, "0005")
    seed_world(engine)
    live, deleted = llm_call(store=False), llm_call(store=False)
    stored = sa.table(
        "stored_response",
        *(sa.column(c) for c in ("tenant", "id", "agent", "session", "document", "sealed")),
        sa.column("previous_id"),
        sa.column("event_id", sa.Uuid),
        *(sa.column(c, UTCDateTime) for c in ("created_at", "expires_at", "deleted_at")),
    )
    expires_at, now = utcnow() + timedelta(days=30), utcnow()
    with transaction(engine) as session:
        for call in (live, deleted):
            record_trajectory(
                session, trajectory("acme").model_copy(update={"id": call.trajectory_id})
            )
            row = {k: v for k, v in _event_row(call).items() if k != "response_id"}
            session.execute(sa.insert(EventRow.__table__).values(**row))
        session.execute(
            sa.insert(stored),
            [
                {
                    "tenant": "acme",
                    "id": f"resp_{name}",
                    "agent": "support-bot",
                    "session": "s-1",
                    "event_id": call.id,
                    "previous_id": "resp_before" if name == "live" else None,
                    "document": json.dumps(
                        {"response": {"created_at": 1_700_000_123}, "input": []}
                    ),
                    "sealed": False,
                    "created_at": now,
                    "expires_at": expires_at,
                    "deleted_at": now if name == "deleted" else None,
                }
                for name, call in (("live", live), ("deleted", deleted))
            ],
        )
    upgrade(engine)
    with transaction(engine) as session:
        found = get_stored_response(session, "acme", "resp_live")
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", "resp_deleted")
    assert found.event_id == live.id and found.expires_at == expires_at
    marked = found.event["metadata"]["extra"]["stored_response"]
    assert marked == {
        "id": "resp_live",
        "created_at": 1_700_000_123,
        "expires_at": expires_at.isoformat(),
        "previous_id": "resp_before",
    }
    engine.dispose()
