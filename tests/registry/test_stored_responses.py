"""Stored responses: idempotent, one tenant's only, gone when deleted or expired."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlmodel import Session

from atdp import new_id, utcnow
from registry import (
    NotFoundError,
    StoredResponse,
    delete_stored_response,
    get_stored_response,
    purge_expired,
    store_responses,
    transaction,
)
from registry.tables import StoredResponseRow
from tests.registry.helpers import seed_world


@pytest.fixture
def world(engine):
    """A registry with tenants acme and globex, both granted the agent support-bot."""
    seed_world(engine)
    return engine


def response(tenant: str = "acme", **changes) -> StoredResponse:
    fields = {
        "id": f"resp_{uuid.uuid4().hex}",
        "tenant": tenant,
        "agent": "support-bot",
        "session": "s-1",
        "trajectory_id": new_id(),
        "event_id": new_id(),
        "previous_id": None,
        "document": '{"output": [{"type": "message", "content": "hi"}]}',
        "created_at": utcnow(),
        "expires_at": None,
    }
    return StoredResponse(**{**fields, **changes})


def test_storing_a_response_twice_keeps_one_row(world) -> None:
    first = response(previous_id=f"resp_{uuid.uuid4().hex}", sealed=True)
    with transaction(world) as session:
        assert store_responses(session, [first, first]) == 1
    with transaction(world) as session:
        assert store_responses(session, [first, response(id=first.id, document="other")]) == 0
        assert get_stored_response(session, "acme", first.id) == first


def test_another_tenant_can_neither_read_nor_delete_a_response(world) -> None:
    acme = response("acme")
    with transaction(world) as session:
        store_responses(session, [acme])
    with transaction(world) as session:
        with pytest.raises(NotFoundError, match=acme.id):
            get_stored_response(session, "globex", acme.id)
        assert delete_stored_response(session, "globex", acme.id) is False
        assert get_stored_response(session, "acme", acme.id).document == acme.document


def test_the_same_id_in_two_tenants_is_two_responses(world) -> None:
    acme = response("acme", document="acme's")
    globex = response("globex", id=acme.id, document="globex's")
    with transaction(world) as session:
        assert store_responses(session, [acme, globex]) == 2
    with transaction(world) as session:
        assert get_stored_response(session, "acme", acme.id).document == "acme's"
        assert get_stored_response(session, "globex", acme.id).document == "globex's"


def test_an_expired_response_is_not_found_and_purged(world) -> None:
    now = utcnow()
    expired = response(expires_at=now - timedelta(seconds=1))
    expiring = response(expires_at=now + timedelta(days=1))
    kept = response(expires_at=None)
    with transaction(world) as session:
        store_responses(session, [expired, expiring, kept])
    with transaction(world) as session:
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", expired.id, now=now)
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", expiring.id, now=now + timedelta(days=1))
        assert get_stored_response(session, "acme", expired.id, now=now - timedelta(minutes=1))
        assert delete_stored_response(session, "acme", expired.id) is False
    with transaction(world) as session:
        counts = purge_expired(session, now)
    assert counts == {
        "events": 0,
        "rewards": 0,
        "trajectories": 0,
        "responses": 1,
        "partitions": 0,
    }
    with transaction(world) as session:
        assert session.get(StoredResponseRow, ("acme", expired.id)) is None
        assert get_stored_response(session, "acme", expiring.id, now=now) == expiring
        assert get_stored_response(session, "acme", kept.id, now=now) == kept
        assert purge_expired(session, now)["responses"] == 0


def test_a_deleted_response_is_gone_and_a_replay_does_not_bring_it_back(world) -> None:
    stored = response(expires_at=utcnow() + timedelta(days=1))
    with transaction(world) as session:
        store_responses(session, [stored])
    with transaction(world) as session:
        assert delete_stored_response(session, "acme", stored.id) is True
    with transaction(world) as session:
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", stored.id)
        assert delete_stored_response(session, "acme", stored.id) is False
        assert store_responses(session, [stored]) == 0  # the capture spool replayed
        with pytest.raises(NotFoundError):
            get_stored_response(session, "acme", stored.id)
        assert session.get(StoredResponseRow, ("acme", stored.id)).document == ""
    with transaction(world) as session:  # the tombstone goes when the response would have
        assert purge_expired(session, stored.expires_at)["responses"] == 1


def test_a_nul_character_is_refused_before_any_backend_sees_it() -> None:
    with pytest.raises(ValidationError, match="NUL"):
        response(document='{"text": "a\x00b"}')
    with pytest.raises(ValidationError, match="NUL"):
        response(id="resp_\x00")


def test_gc_reports_the_stored_responses_it_purged(world, database_url) -> None:
    with transaction(world) as session:
        store_responses(session, [response(expires_at=utcnow() - timedelta(seconds=1))])
    result = subprocess.run(
        [str(Path(sys.executable).parent / "evoplane"), "gc"],
        env={"EVOPLANE_DATABASE_URL": database_url, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "purged 0 events, 0 rewards, 0 trajectories, 1 stored responses" in result.stderr


_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))
_OFFSETS = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
_TIMES = st.datetimes(datetime(1970, 1, 1), datetime(2100, 1, 1), timezones=_OFFSETS)


@given(
    id=_TEXT.filter(lambda s: 1 <= len(s) <= 200),
    previous_id=st.none() | _TEXT.filter(lambda s: len(s) <= 200),
    document=_TEXT,
    sealed=st.booleans(),
    created_at=_TIMES,
    expires_in=st.none() | st.timedeltas(timedelta(seconds=1), timedelta(days=3650)),
)
def test_a_stored_response_reads_back_as_it_was_stored(
    world, id, previous_id, document, sealed, created_at, expires_in
) -> None:
    now = datetime(2100, 1, 2, tzinfo=UTC)
    stored = response(
        id=id,
        previous_id=previous_id,
        document=document,
        sealed=sealed,
        created_at=created_at,
        expires_at=now + expires_in if expires_in else None,
    )
    with Session(world) as session:  # never committed: each example starts empty
        assert store_responses(session, [stored]) == 1
        assert get_stored_response(session, "acme", id, now=now) == stored
