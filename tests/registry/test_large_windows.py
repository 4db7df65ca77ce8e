"""Window reads that take a list of ids work however long the list: a busy agent's window
names more events than a database takes parameters in one statement (PostgreSQL: 65,535)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from registry import event_kinds, insert_events, record_trajectory, replies, transaction
from registry.db import id_chunks
from tests.registry.helpers import event, seed_world, trajectory

# Past PostgreSQL's limit on the parameters of one statement.
MANY = 70_000


def test_event_kinds_and_replies_take_any_number_of_ids(engine) -> None:
    seed_world(engine, tenants=("acme",))
    recorded = trajectory("acme")
    answer = event(recorded, seq=0)
    with transaction(engine) as session:
        record_trajectory(session, recorded)
        insert_events(session, [answer])
    unknown = [uuid.uuid4() for _ in range(MANY)]
    with transaction(engine) as session:
        kinds = event_kinds(session, [*unknown, answer.id])
        answered = replies(session, [*unknown, answer.id])
    assert kinds == {answer.id: answer.kind.value}
    assert answered == []


@given(ids=st.lists(st.uuids(), max_size=60), size=st.integers(1, 25))
def test_id_chunks_keep_every_id_once_in_order(ids: list[uuid.UUID], size: int) -> None:
    chunks = list(id_chunks(ids, size))
    assert [i for chunk in chunks for i in chunk] == ids
    assert all(1 <= len(chunk) <= size for chunk in chunks)
