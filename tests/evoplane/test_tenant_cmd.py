"""`evoplane tenant update | history`: a tenant's policy changed after creation, as a person
runs it."""

from __future__ import annotations

from pathlib import Path

from registry import create_db_engine, get_tenant, tenant_policy_history, transaction
from tests.evoplane.test_cli import run


def test_a_tenant_policy_is_updated_and_its_history_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {"EVOPLANE_DATA_DIR": str(data)}
    assert run("db", "upgrade", env=env).returncode == 0
    assert run("tenant", "create", "acme", "--retention-days", "30", env=env).returncode == 0

    updated = run(
        "tenant", "update", "acme", "--training", "debug_only", "--keep-forever",
        "--redact", r"ACME-\d+", "--actor", "ana", "--reason", "new contract", env=env,
    )  # fmt: skip
    assert updated.returncode == 0, updated.stderr
    assert "acme: training eligible -> debug_only" in updated.stdout
    assert "acme: retention_days 30 -> None" in updated.stdout
    again = run("tenant", "update", "acme", "--training", "debug_only", "--actor", "bo", env=env)
    assert "nothing changed" in again.stdout
    nothing = run("tenant", "update", "acme", "--actor", "bo", env=env)
    assert nothing.returncode != 0 and "name something to change" in nothing.stderr
    bad = run("tenant", "update", "acme", "--redact", "(oops", "--actor", "bo", env=env)
    assert bad.returncode != 0 and "is not a regular expression" in bad.stderr
    unsealed = run("tenant", "update", "acme", "--sealed-reader", "rl", "--actor", "bo", env=env)
    assert unsealed.returncode != 0 and "need seal_raw" in unsealed.stderr
    history = run("tenant", "history", "acme", env=env)
    assert "ana" in history.stdout and "new contract" in history.stdout

    engine = create_db_engine(f"sqlite:///{data / 'registry.db'}")
    with transaction(engine) as session:
        policy = get_tenant(session, "acme").policy
        (change,) = tenant_policy_history(session, "acme")
    engine.dispose()
    assert (policy.training, policy.retention_days) == ("debug_only", None)
    assert policy.redaction_patterns == [r"ACME-\d+"]
    assert (change.actor, change.reason) == ("ana", "new contract")
