"""Tenants, hashed API keys, agent grants, evolution records."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from registry import (
    AlreadyExistsError,
    EvolutionAlreadyRunning,
    InvalidRecordError,
    NotFoundError,
    TenantPolicy,
    append_stage,
    authenticate,
    create_api_key,
    create_tenant,
    finish_evolution,
    get_evolution,
    get_tenant,
    list_agents,
    list_evolutions,
    revoke_api_key,
    running_evolution,
    start_evolution,
    tenant_agents,
    transaction,
    update_evolution,
)
from tests.registry.helpers import seed_world


@pytest.fixture
def world(engine):
    seed_world(engine)
    return engine


def test_keys_are_stored_hashed_and_authenticate(world) -> None:
    with transaction(world) as session:
        issued = create_api_key(session, "acme", agents=["support-bot"])
    with world.connect() as connection:
        stored = " ".join(
            str(v) for row in connection.execute(sa.text("SELECT * FROM api_key")) for v in row
        )
    assert issued.key not in stored
    with transaction(world) as session:
        identity = authenticate(session, issued.key)
        assert (identity.tenant, identity.may_use("support-bot"), identity.may_use("other")) == (
            "acme",
            True,
            False,
        )
        assert authenticate(session, issued.key + "x") is None
        revoke_api_key(session, issued.id)
        assert authenticate(session, issued.key) is None


def test_key_for_unknown_agent_or_tenant_is_refused(world) -> None:
    with transaction(world) as session:
        with pytest.raises(NotFoundError, match="agent nope"):
            create_api_key(session, "acme", agents=["nope"])
        with pytest.raises(NotFoundError, match="tenant nobody"):
            create_api_key(session, "nobody")


def test_tenant_names_and_policies(world) -> None:
    with transaction(world) as session:
        with pytest.raises(AlreadyExistsError):
            create_tenant(session, "acme")
        with pytest.raises(InvalidRecordError, match="lowercase"):
            create_tenant(session, "Bad Name!")
        create_tenant(session, "strict", TenantPolicy(training="audit_only", retention_days=30))
    with transaction(world) as session:
        policy = get_tenant(session, "strict").policy
        assert (policy.training, policy.retention_days) == ("audit_only", 30)
        assert tenant_agents(session, "acme") == ["support-bot"]
        assert [a.name for a in list_agents(session, tenant="strict")] == []


def test_evolution_records(world) -> None:
    with transaction(world) as session:
        record = start_evolution(
            session, "evolution-support-bot-1", "support-bot", scope={"tenants": ["acme"]}
        )
        assert start_evolution(session, "evolution-support-bot-1", "support-bot") == record
        update_evolution(session, record.id, action="memory", stage="replay")
        gate = {"gate": "replay", "outcome": "pass", "score": 0.9}
        append_stage(session, record.id, gate)
        append_stage(session, record.id, gate)  # a retried activity
        with pytest.raises(TypeError, match="agent"):
            update_evolution(session, record.id, agent="someone-else")
    with transaction(world) as session:
        stored = get_evolution(session, record.id)
        assert (stored.action, stored.stage, stored.stages) == ("memory", "replay", [gate])
        assert [e.id for e in list_evolutions(session, agent="support-bot", stage="replay")] == [
            record.id
        ]
        assert list_evolutions(session, outcome="promoted") == []


def test_one_running_evolution_per_agent(world) -> None:
    with transaction(world) as session:
        start_evolution(session, "evolution-support-bot-1", "support-bot")
    with transaction(world) as session, pytest.raises(EvolutionAlreadyRunning, match="-1"):
        start_evolution(session, "evolution-support-bot-2", "support-bot")
    with transaction(world) as session:
        finish_evolution(session, "evolution-support-bot-1", "promoted")
        finish_evolution(session, "evolution-support-bot-1", "promoted")  # a retry
        with pytest.raises(ValueError, match="already finished as promoted"):
            finish_evolution(session, "evolution-support-bot-1", "aborted")
    with transaction(world) as session:
        assert start_evolution(session, "evolution-support-bot-2", "support-bot").stage == "started"
        assert running_evolution(session, "support-bot").id == "evolution-support-bot-2"


def test_a_gate_stored_as_a_skipped_pass_reads_as_skipped(world) -> None:
    """Records written before `skipped` was a verdict said `pass` for a skipped gate."""
    old = {"gate": "shadow", "verdict": "pass", "reason": "skipped by ana", "skipped": True}
    judged = {"gate": "canary", "verdict": "pass", "reason": "passed", "skipped": False}
    with transaction(world) as session:
        record = start_evolution(session, "evolution-support-bot-1", "support-bot")
        append_stage(session, record.id, old)
        append_stage(session, record.id, judged)
    with transaction(world) as session:
        stages = get_evolution(session, record.id).stages
        listed = list_evolutions(session, agent="support-bot")[0].stages
    assert stages == listed == [{**old, "verdict": "skipped"}, judged]
