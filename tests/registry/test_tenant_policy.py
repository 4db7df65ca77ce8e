"""A tenant's policy changed after its creation: validated, recorded, announced."""

from __future__ import annotations

import re

import psycopg
import pytest
import sqlalchemy as sa

from proxy.catalog import Catalog
from registry import (
    InvalidRecordError,
    NotFoundError,
    TenantPolicy,
    create_db_engine,
    create_tenant,
    get_tenant,
    tenant_policy_history,
    transaction,
    update_tenant_policy,
    upgrade,
)
from registry.changes import Change, listen
from registry.db import libpq_conninfo
from tests.conftest import postgres_schema_url


@pytest.fixture
def acme(engine):
    with transaction(engine) as session:
        create_tenant(session, "acme", TenantPolicy(retention_days=30, redaction_patterns=["x"]))
    return engine


def test_a_policy_changes_field_by_field_and_each_change_is_recorded(acme) -> None:
    with transaction(acme) as session:
        first = update_tenant_policy(
            session, "acme", {"training": "debug_only", "retention_days": 7}, actor="ana",
            reason="contract",
        )  # fmt: skip
        second = update_tenant_policy(
            session, "acme", {"seal_raw": True, "sealed_readers": ["rl-job"]}, actor="bo"
        )
        unchanged = update_tenant_policy(session, "acme", {"retention_days": 7}, actor="bo")
        policy = get_tenant(session, "acme").policy
        history = tenant_policy_history(session, "acme")
    assert first.changed == {
        "training": {"from": "eligible", "to": "debug_only"},
        "retention_days": {"from": 30, "to": 7},
    }
    assert (first.actor, first.reason) == ("ana", "contract")
    assert unchanged is None
    assert policy.training == "debug_only" and policy.retention_days == 7
    assert policy.redaction_patterns == ["x"]  # what was not named stays
    assert policy.sealed_readers == ["rl-job"] and policy.seal_raw
    assert [(c.actor, sorted(c.changed)) for c in history] == [
        ("ana", ["retention_days", "training"]),
        ("bo", ["seal_raw", "sealed_readers"]),
    ]
    assert history[-1].policy == policy and history[0].at <= second.at


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"retention": 7}, "has no retention; its fields are training, consent"),
        ({"training": "sometimes"}, "not a valid tenant policy"),
        ({"retention_days": 0}, "not a valid tenant policy"),
        ({"redaction_patterns": ["(unclosed"]}, "'(unclosed' is not a regular expression"),
        ({"sealed_readers": ["rl-job"]}, "readers of sealed raw copies need seal_raw"),
    ],
)
def test_a_bad_change_is_refused_and_changes_nothing(acme, changes, words) -> None:
    with transaction(acme) as session, pytest.raises(InvalidRecordError, match=re.escape(words)):
        update_tenant_policy(session, "acme", changes, actor="ana")
    with transaction(acme) as session:
        assert get_tenant(session, "acme").policy.retention_days == 30
        assert tenant_policy_history(session, "acme") == []


def test_an_unknown_tenant_is_not_found(acme) -> None:
    with transaction(acme) as session, pytest.raises(NotFoundError, match="nobody"):
        update_tenant_policy(session, "nobody", {"retention_days": 1}, actor="ana")


def test_the_history_is_append_only(acme) -> None:
    with transaction(acme) as session:
        update_tenant_policy(session, "acme", {"retention_days": 1}, actor="ana")
    with pytest.raises(sa.exc.DBAPIError, match="immutable"), acme.begin() as connection:
        connection.execute(sa.text("UPDATE tenant_policy_change SET actor = 'mallory'"))
    with pytest.raises(sa.exc.DBAPIError, match="immutable"), acme.begin() as connection:
        connection.execute(sa.text("DELETE FROM tenant_policy_change"))


async def test_a_change_is_announced_and_drops_the_gateways_cached_policy(
    postgres_schema,
) -> None:
    engine = create_db_engine(postgres_schema_url(postgres_schema))
    upgrade(engine)
    with transaction(engine) as session:
        create_tenant(session, "acme")
    catalog = Catalog(engine, ttl=3600.0)
    try:
        assert (await catalog.policy("acme")).retention_days is None
        with psycopg.connect(libpq_conninfo(engine), autocommit=True) as listening:
            channel = listen(listening)
            with transaction(engine) as session:
                update_tenant_policy(session, "acme", {"retention_days": 5}, actor="ana")
            heard = [n.payload for n in listening.notifies(timeout=0.5) if n.channel == channel]
        assert heard == ["policy:acme"]
        assert (await catalog.policy("acme")).retention_days is None  # cached for an hour
        catalog.changed((Change.POLICY, "acme"))  # what a listening gateway does on hearing it
        assert (await catalog.policy("acme")).retention_days == 5
    finally:
        await catalog.aclose()
        engine.dispose()
