"""`evoplane tenant | key | agent`: the admin functions (the control API exposes the same)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from evoplane.settings import load_settings

tenant_app = typer.Typer(
    help="Tenants: create, list and update them, with their data policy.",
    no_args_is_help=True,
)
key_app = typer.Typer(
    help="API keys: issue (shown once, stored hashed) and revoke.", no_args_is_help=True
)
agent_app = typer.Typer(
    help="Agents: create one with its first version, grant it to tenants.", no_args_is_help=True
)

console = Console(soft_wrap=True)


def _engine():
    from registry import check_schema, create_db_engine

    engine = create_db_engine(load_settings().registry_url)
    check_schema(engine)
    return engine


@tenant_app.command("create")
def tenant_create(
    name: str,
    training: str = typer.Option("eligible", help="eligible | debug_only | audit_only"),
    retention_days: int | None = typer.Option(
        None, help="Purge captured data after this many days."
    ),
    redact: list[str] = typer.Option(
        [], help="Extra regex to redact from stored text (repeatable)."
    ),
    seal_raw: bool = typer.Option(
        False,
        "--seal-raw",
        help="Also keep an encrypted raw copy of each redacted event (gateways need "
        "EVOPLANE_SEAL_KEY; `evoplane key seal-key` makes one).",
    ),
    sealed_reader: list[str] = typer.Option(
        [],
        "--sealed-reader",
        help="A training job allowed to read the sealed raw copies (repeatable; needs --seal-raw).",
    ),
) -> None:
    """Create a tenant."""
    from registry import TenantPolicy, create_tenant, transaction

    if sealed_reader and not seal_raw:
        raise typer.BadParameter(
            "readers of sealed raw copies need --seal-raw (without it no raw copy is kept)",
            param_hint="--sealed-reader",
        )
    policy = TenantPolicy(
        training=training,
        retention_days=retention_days,
        redaction_patterns=redact,
        seal_raw=seal_raw,
        sealed_readers=sealed_reader,
    )
    with transaction(_engine()) as session:
        create_tenant(session, name, policy)
    sealed = f"; sealed raw copies for {', '.join(sealed_reader) or 'no reader yet'}"
    console.print(
        f"tenant {name} created (training: {policy.training}{sealed if seal_raw else ''}).",
        highlight=False,
    )


@tenant_app.command("list")
def tenant_list() -> None:
    """List tenants and their policies."""
    from registry import list_tenants, tenant_agents, transaction

    table = Table("tenant", "training", "retention", "agents")
    with transaction(_engine()) as session:
        for tenant in list_tenants(session):
            days = tenant.policy.retention_days
            table.add_row(
                tenant.name,
                tenant.policy.training,
                f"{days} d" if days else "-",
                ", ".join(tenant_agents(session, tenant.name)) or "-",
            )
    console.print(table)


@tenant_app.command("update")
def tenant_update(
    name: str,
    actor: str = typer.Option(..., help="Who changes the policy (recorded)."),
    reason: str = typer.Option("", help="Why (recorded)."),
    training: str | None = typer.Option(None, help="eligible | debug_only | audit_only"),
    retention_days: int | None = typer.Option(
        None, help="Purge data captured from now on after this many days."
    ),
    keep_forever: bool = typer.Option(False, "--keep-forever", help="Drop the retention."),
    redact: list[str] | None = typer.Option(
        None, help="Extra regexes to redact (repeatable; replaces the list)."
    ),
    clear_redact: bool = typer.Option(False, "--clear-redact", help="No extra regexes."),
    seal_raw: bool | None = typer.Option(
        None, "--seal-raw/--no-seal-raw", help="Keep an encrypted raw copy of redacted events."
    ),
    sealed_reader: list[str] | None = typer.Option(
        None, "--sealed-reader", help="Jobs allowed to read sealed copies (repeatable; replaces)."
    ),
) -> None:
    """Change a tenant's policy; what is not named stays. Recorded with who, when and why,
    and announced to the gateways (they apply it within a round trip)."""
    from registry import transaction, update_tenant_policy

    if keep_forever and retention_days is not None:
        raise typer.BadParameter("give --retention-days or --keep-forever, not both")
    if clear_redact and redact:
        raise typer.BadParameter("give --redact or --clear-redact, not both")
    changes = {
        "training": training,
        "retention_days": retention_days,
        "redaction_patterns": redact or None,
        "seal_raw": seal_raw,
        "sealed_readers": sealed_reader or None,
    }
    changes = {field: value for field, value in changes.items() if value is not None}
    changes |= {"retention_days": None} if keep_forever else {}
    changes |= {"redaction_patterns": []} if clear_redact else {}
    if not changes:
        raise typer.BadParameter("name something to change, e.g. --retention-days 30")
    with transaction(_engine()) as session:
        change = update_tenant_policy(session, name, changes, actor=actor, reason=reason)
    if change is None:
        console.print(f"tenant {name}: the policy already says that; nothing changed.")
        return
    for field, values in change.changed.items():
        console.print(f"{name}: {field} {values['from']} -> {values['to']}", highlight=False)


@tenant_app.command("history")
def tenant_history(name: str) -> None:
    """Every change of a tenant's policy: when, who, what and why."""
    from registry import tenant_policy_history, transaction

    table = Table("at", "actor", "changed", "reason")
    with transaction(_engine()) as session:
        for change in tenant_policy_history(session, name):
            changed = "; ".join(
                f"{field} {values['from']} -> {values['to']}"
                for field, values in change.changed.items()
            )
            table.add_row(
                change.at.isoformat(timespec="seconds"), change.actor, changed, change.reason
            )
    console.print(table)


@key_app.command("create")
def key_create(
    tenant: str = typer.Option(..., help="The tenant the key belongs to."),
    agents: str | None = typer.Option(None, help="Comma-separated agents the key is limited to."),
) -> None:
    """Issue an API key; it is printed once and only its hash is stored."""
    from registry import create_api_key, transaction

    limited = [a.strip() for a in agents.split(",") if a.strip()] if agents else None
    with transaction(_engine()) as session:
        issued = create_api_key(session, tenant, limited)
    console.print(
        f"key {issued.id} for tenant {tenant}"
        + (f" (agents: {', '.join(limited)})" if limited else ""),
        highlight=False,
    )
    print(issued.key)


@key_app.command("revoke")
def key_revoke(key_id: str) -> None:
    """Revoke a key by its id (gateways stop accepting it within seconds)."""
    import uuid

    from registry import revoke_api_key, transaction

    with transaction(_engine()) as session:
        revoke_api_key(session, uuid.UUID(key_id))
    console.print(f"key {key_id} revoked.", highlight=False)


@agent_app.command("create")
def agent_create(
    name: str,
    engine: str = typer.Option(
        "openai",
        help="Upstream engine: openai (any OpenAI-compatible server), anthropic (the "
        "Messages API: Claude, with --base-url https://api.anthropic.com/v1), "
        "openai-responses (an upstream that speaks the Responses API), sglang.",
    ),
    base_url: str = typer.Option(
        ..., help="The upstream's API root, e.g. http://127.0.0.1:8000/v1."
    ),
    model: str | None = typer.Option(None, help="Model name sent upstream."),
    instructions: str = typer.Option("", help="Initial harness instructions (system prompt)."),
    tenants: str | None = typer.Option(None, help="Comma-separated tenants allowed to use it."),
    author: str = typer.Option("cli", help="Recorded as the first version's author."),
) -> None:
    """Create an agent with its initial stable version."""
    from atdp import Harness, ModelRef, VersionSpec
    from registry import create_agent, grant_agent, transaction

    spec = VersionSpec(
        model=ModelRef(engine=engine, base_url=base_url, model=model),
        harness=Harness(instructions=instructions),
    )
    with transaction(_engine()) as session:
        _, version = create_agent(session, name, spec, author=author)
        for tenant in [t.strip() for t in (tenants or "").split(",") if t.strip()]:
            grant_agent(session, tenant, name)
    console.print(f"agent {name} created; stable = {version.id}.", highlight=False)


@agent_app.command("grant")
def agent_grant(name: str, tenant: str = typer.Option(..., help="The tenant to allow.")) -> None:
    """Allow a tenant to use an agent."""
    from registry import grant_agent, transaction

    with transaction(_engine()) as session:
        grant_agent(session, tenant, name)
    console.print(f"tenant {tenant} may use agent {name}.", highlight=False)


@agent_app.command("configure")
def agent_configure(
    name: str,
    file: Path = typer.Option(
        ..., exists=True, dir_okay=False, help="JSON with any of: gate, policy, safety_suite."
    ),
) -> None:
    """Set an agent's evolution settings (gate parameters, policy thresholds, safety suite)."""
    from pydantic import ValidationError

    from evolution.settings import EvolutionSettings
    from registry import set_agent_settings, transaction

    try:
        settings = EvolutionSettings.model_validate_json(file.read_text())
    except ValidationError as error:
        raise typer.BadParameter(f"{file} is not valid evolution settings:\n{error}") from None
    with transaction(_engine()) as session:
        set_agent_settings(session, name, settings.model_dump(mode="json", exclude_unset=True))
    console.print(f"agent {name} configured from {file}.", highlight=False)


@agent_app.command("settings")
def agent_settings(name: str) -> None:
    """Print an agent's evolution settings, defaults filled in, as JSON."""
    from evolution.settings import EvolutionSettings
    from registry import get_agent, transaction

    with transaction(_engine()) as session:
        stored = get_agent(session, name).settings
    console.print_json(EvolutionSettings.of(stored).model_dump_json())


@key_app.command("seal-key")
def key_seal_key() -> None:
    """Print a new key for sealed raw copies; set it as EVOPLANE_SEAL_KEY on gateways and
    on the training jobs a tenant permits (`--seal-raw --sealed-reader JOB`)."""
    from cryptography.fernet import Fernet

    print(Fernet.generate_key().decode())
