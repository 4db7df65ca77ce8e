"""Versions, alias history, events and rewards cannot be changed once written."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlalchemy as sa
from sqlmodel import Session

from registry import (
    Alias,
    InvalidRecordError,
    NotFoundError,
    alias_history,
    aliases_at,
    current_aliases,
    get_version,
    insert_events,
    list_versions,
    previous_stable,
    record_trajectory,
    register_version,
    set_alias,
    transaction,
)
from registry.tables import AgentVersionRow
from tests.registry.helpers import event, seed_world, spec, trajectory


@pytest.fixture
def world(engine):
    seed_world(engine)
    return engine


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE agent_version SET reason = 'rewritten'",
        "DELETE FROM agent_version",
        "UPDATE alias_event SET version_id = NULL",
        "DELETE FROM alias_event",
    ],
)
def test_versions_and_alias_history_refuse_sql_changes(world, statement: str) -> None:
    with pytest.raises(sa.exc.DBAPIError, match="immutable"), world.begin() as connection:
        connection.execute(sa.text(statement))
    with transaction(world) as session:
        assert get_version(session, "support-bot@v1").reason == "initial version"
        assert len(alias_history(session, "support-bot")) == 1


def test_version_update_through_the_orm_fails(world) -> None:
    with pytest.raises(sa.exc.DBAPIError, match="immutable"), Session(world) as session:
        row = session.get(AgentVersionRow, "support-bot@v1")
        row.spec = spec("Jailbroken.").model_dump(mode="json")
        session.add(row)
        session.commit()
    with transaction(world) as session:
        assert get_version(session, "support-bot@v1").spec.harness.instructions == "Be helpful."


def test_events_refuse_updates(world) -> None:
    t = trajectory("acme")
    with transaction(world) as session:
        record_trajectory(session, t)
        insert_events(session, [event(t, 0)])
    with pytest.raises(sa.exc.DBAPIError, match="immutable"), world.begin() as connection:
        connection.execute(sa.text("UPDATE event SET kind = 'tool_call'"))


def test_registering_same_content_returns_the_same_version(world) -> None:
    with transaction(world) as session:
        first = register_version(
            session, "support-bot", spec("v2"), parent_id="support-bot@v1", author="a", reason="r"
        )
        again = register_version(
            session,
            "support-bot",
            spec("v2"),
            parent_id="support-bot@v1",
            author="someone else",
            reason="retry",
        )
        third = register_version(
            session, "support-bot", spec("v3"), parent_id=first.id, author="a", reason="r"
        )
    assert again == first
    assert (first.id, first.number, third.number) == ("support-bot@v2", 2, 3)
    with transaction(world) as session:
        assert [v.id for v in list_versions(session, "support-bot")] == [
            "support-bot@v1",
            "support-bot@v2",
            "support-bot@v3",
        ]


def test_parent_must_belong_to_the_agent(world) -> None:
    with transaction(world) as session, pytest.raises(InvalidRecordError, match="not a version of"):
        register_version(
            session, "support-bot", spec("x"), parent_id="other@v1", author="a", reason="r"
        )


def test_alias_history_answers_what_served_at_time_t(world) -> None:
    with transaction(world) as session:
        v1 = "support-bot@v1"
        v2 = register_version(
            session, "support-bot", spec("v2"), parent_id=v1, author="a", reason="r"
        ).id
        v3 = register_version(
            session, "support-bot", spec("v3"), parent_id=v2, author="a", reason="r"
        ).id
        t0 = alias_history(session, "support-bot")[0].at
        t1, t2, t3, t4 = (t0 + timedelta(hours=h) for h in (1, 2, 3, 4))
        set_alias(
            session,
            "support-bot",
            Alias.CANARY,
            v2,
            weight=0.25,
            actor="evo",
            reason="canary",
            at=t1,
        )
        set_alias(session, "support-bot", Alias.STABLE, v2, actor="evo", reason="promote", at=t2)
        set_alias(session, "support-bot", Alias.CANARY, None, actor="evo", reason="promoted", at=t2)
        set_alias(session, "support-bot", Alias.STABLE, v3, actor="evo", reason="promote", at=t3)
        set_alias(session, "support-bot", Alias.STABLE, v2, actor="alice", reason="rollback", at=t4)

        assert aliases_at(session, "support-bot", t0 - timedelta(seconds=1)).stable is None
        assert aliases_at(session, "support-bot", t0).stable == v1
        at_t1 = aliases_at(session, "support-bot", t1 + timedelta(minutes=30))
        assert (at_t1.stable, at_t1.canary, at_t1.canary_weight) == (v1, v2, 0.25)
        at_t2 = aliases_at(session, "support-bot", t2)
        assert (at_t2.stable, at_t2.canary) == (v2, None)
        assert aliases_at(session, "support-bot", t3 + timedelta(minutes=1)).stable == v3
        assert aliases_at(session, "support-bot", t4 + timedelta(minutes=1)).stable == v2
        assert previous_stable(session, "support-bot") == v3
        reasons = [m.reason for m in alias_history(session, "support-bot", Alias.STABLE)]
        assert reasons == ["agent created", "promote", "promote", "rollback"]


def test_current_aliases_follow_the_latest_moves(world) -> None:
    with transaction(world) as session:
        v2 = register_version(session, "support-bot", spec("v2"), author="a", reason="r").id
        set_alias(session, "support-bot", Alias.SHADOW, v2, actor="evo")
        set_alias(session, "support-bot", Alias.CANARY, v2, weight=0.05, actor="evo")
        state = current_aliases(session, "support-bot")
        assert (state.stable, state.canary, state.canary_weight, state.shadow) == (
            "support-bot@v1",
            v2,
            0.05,
            v2,
        )
        set_alias(session, "support-bot", Alias.STABLE, v2, actor="evo", reason="promote")
        set_alias(session, "support-bot", Alias.CANARY, None, actor="evo")
        set_alias(session, "support-bot", Alias.SHADOW, None, actor="evo")
        state = current_aliases(session, "support-bot")
        assert (state.stable, state.canary, state.shadow) == (v2, None, None)
        assert previous_stable(session, "support-bot") == "support-bot@v1"


def test_a_holdback_is_weighted_and_leaves_room_for_the_canary(world) -> None:
    with transaction(world) as session:
        v2 = register_version(session, "support-bot", spec("v2"), author="a", reason="r").id
        v3 = register_version(session, "support-bot", spec("v3"), author="a", reason="r").id
        set_alias(session, "support-bot", Alias.STABLE, v2, actor="evo", reason="promote")
        with pytest.raises(InvalidRecordError, match="holdback needs a traffic weight"):
            set_alias(session, "support-bot", Alias.HOLDBACK, "support-bot@v1", actor="evo")
        set_alias(session, "support-bot", Alias.HOLDBACK, "support-bot@v1", weight=0.1, actor="evo")
        with pytest.raises(InvalidRecordError, match="at most all of them"):
            set_alias(session, "support-bot", Alias.CANARY, v3, weight=0.95, actor="evo")
        set_alias(session, "support-bot", Alias.CANARY, v3, weight=0.9, actor="evo")
        state = current_aliases(session, "support-bot")
        assert (state.stable, state.canary, state.holdback) == (v2, v3, "support-bot@v1")
        assert (state.canary_weight, state.holdback_weight) == (0.9, 0.1)
        set_alias(session, "support-bot", Alias.HOLDBACK, None, actor="evo")
        assert current_aliases(session, "support-bot").holdback is None


def test_alias_rules(world) -> None:
    with transaction(world) as session:
        v2 = register_version(session, "support-bot", spec("v2"), author="a", reason="r").id
        with pytest.raises(InvalidRecordError, match="cannot be cleared"):
            set_alias(session, "support-bot", Alias.STABLE, None, actor="a")
        with pytest.raises(InvalidRecordError, match="weight"):
            set_alias(session, "support-bot", Alias.CANARY, v2, weight=0.0, actor="a")
        with pytest.raises(InvalidRecordError, match="not a version"):
            set_alias(session, "support-bot", Alias.SHADOW, "other@v9", actor="a")
        last = alias_history(session, "support-bot")[-1].at
        with pytest.raises(InvalidRecordError, match="append-only"):
            set_alias(
                session, "support-bot", Alias.SHADOW, v2, actor="a", at=last - timedelta(days=1)
            )
        with pytest.raises(NotFoundError):
            set_alias(session, "nobody", Alias.SHADOW, v2, actor="a")
