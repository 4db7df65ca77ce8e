"""`evoplane evolve | status | approve | reject | abort | rollback | end-holdback | versions
[show | diff] | schedule`.

Each command is a call to the control API (`evoplane api`, started by `evoplane up`), so
the CLI and HTTP users see the same behaviour and the same errors.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from evoplane.control.client import ControlClient
from evoplane.settings import load_settings

console = Console(soft_wrap=True)


def _control() -> ControlClient:
    """The control API this machine's settings point at, with its admin token."""
    from evoplane.stack.launcher import admin_token_of

    settings = load_settings()
    return ControlClient(f"http://{settings.host}:{settings.api_port}", admin_token_of(settings))


def _duration_minutes(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", text.strip())
    if not match:
        raise typer.BadParameter("use a number and a unit, e.g. 30m, 2h, 1d")
    value, unit = float(match[1]), match[2]
    return value * {"s": 1 / 60, "m": 1, "h": 60, "d": 1440}[unit]


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise typer.BadParameter(
            f"{text!r}: give an ISO time with its zone, e.g. 2026-12-01T09:30Z or "
            "2026-12-01T10:30+01:00"
        )
    return moment


def evolve(
    agent: str = typer.Option(..., help="The agent to evolve."),
    tenant: list[str] = typer.Option([], help="Limit the window to these tenants (repeatable)."),
    force: str | None = typer.Option(
        None, help="memory | skill | harness | tool_schema | weights | rollback | noop"
    ),
    candidate: Path | None = typer.Option(
        None, exists=True, dir_okay=False, help="A VersionSpec JSON file to evaluate."
    ),
    skip_gate: list[str] = typer.Option([], help="replay | shadow | canary (recorded)."),
    approve_before: list[str] = typer.Option([], help="canary | promotion: wait for a person."),
    window: str = typer.Option("1d", help="Traffic window, e.g. 30m, 6h, 1d."),
    since: str | None = typer.Option(
        None, help="Traffic since this time instead of --window, e.g. 2026-12-01T09:30Z."
    ),
    actor: str = typer.Option("cli", help="Who is asking (recorded)."),
    reason: str = typer.Option("", help="Why (recorded)."),
) -> None:
    """Start an evolution; prints its id and where to watch it."""
    options: dict[str, Any] = {
        "skip_gates": skip_gate,
        "approve_before": approve_before,
        "window_minutes": _duration_minutes(window),
        **({"window_since": _moment(since).isoformat()} if since else {}),
        "actor": actor,
        "reason": reason,
    }
    if force:
        options["force"] = force
    if candidate:
        options["candidate"] = json.loads(candidate.read_text())
    with _control() as control:
        started = control.evolve(agent, options, tenants=tenant or None)
    console.print(f"started [bold]{started['id']}[/bold]")
    if started.get("ui"):
        console.print(f"watch it: {started['ui']}")


def status(evolution_id: str | None = typer.Argument(None), agent: str | None = None) -> None:
    """One evolution in detail, or the latest ones (optionally of one agent)."""
    with _control() as control:
        found = control.evolution(evolution_id) if evolution_id else None
        records = control.evolutions(agent) if found is None else []
    for record in records:  # one line each: greppable
        console.print(
            f"{record['id']}  action={record['action'] or '-'}  stage={record['stage']}  "
            f"outcome={record['outcome'] or '-'}  "
            f"candidate={record['candidate_version_id'] or '-'}",
            highlight=False,
        )
    if found is None:
        return
    live, record = found["live"] or {}, found["record"] or {}
    console.print(f"[bold]{evolution_id}[/bold]  {found.get('ui') or ''}")
    console.print(f"stage: {live.get('stage') or record.get('stage')}")
    console.print(f"action: {live.get('action') or record.get('action') or '-'}")
    for tried in live.get("tried", []):  # actions whose operator could not help, in order
        outcome = tried["outcome"].replace("_", " ")
        console.print(f"tried {tried['action']}: {outcome} ({tried['reason']})", highlight=False)
    console.print(f"reason: {live.get('reason') or '-'}")
    for gate in live.get("gates", []):
        console.print(f"  {gate['gate']}: {gate['verdict']} ({gate['reason']})")
        if gate.get("findings"):
            console.print(f"    {_findings_line(gate['findings'])}", highlight=False)
    if live.get("awaiting_approval"):
        console.print(f"waiting for approval before the {live['awaiting_approval']}")
    console.print(f"outcome: {live.get('outcome') or record.get('outcome') or '-'}")


def _findings_line(findings: list[dict[str, Any]]) -> str:
    """Failures the parent shares, said as what they are: facts about the agent."""
    said = "; ".join(
        f"{finding['case']} fails {', '.join(finding['checks'])} on the parent too"
        for finding in findings
    )
    return f"findings about the agent (not caused by this candidate): {said}"


def approve(evolution_id: str, actor: str = typer.Option(...), reason: str = "") -> None:
    """Let an evolution past its approval point."""
    with _control() as control:
        result = control.decide(evolution_id, "approve", actor, reason)
    console.print(f"approved; now at {result['stage']}")


def reject(evolution_id: str, actor: str = typer.Option(...), reason: str = "") -> None:
    """Stop an evolution at its approval point."""
    with _control() as control:
        result = control.decide(evolution_id, "reject", actor, reason)
    console.print(f"rejected: {result['reason']}")


def abort(evolution_id: str, actor: str = typer.Option(...), reason: str = "") -> None:
    """Stop an evolution at its next step; canary and shadow are cleared."""
    with _control() as control:
        control.decide(evolution_id, "abort", actor, reason)
    console.print("abort requested")


def rollback(
    agent: str = typer.Option(...),
    to: str | None = typer.Option(None, help="Version id; default: the previous stable."),
    actor: str = typer.Option(...),
    reason: str = typer.Option(..., help="Why (recorded with the move)."),
) -> None:
    """Put an earlier version back on stable; canary, shadow and holdback are cleared."""
    with _control() as control:
        result = control.rollback(agent, actor, reason, to_version=to)
    console.print(f"{agent}: stable {result['from_version']} -> {result['to_version']}")


def end_holdback(
    agent: str = typer.Option(...),
    actor: str = typer.Option(...),
    reason: str = typer.Option("", help="Why (recorded with the move)."),
) -> None:
    """Send the new sessions a holdback keeps on the replaced version to stable instead."""
    with _control() as control:
        result = control.end_holdback(agent, actor, reason)
    ended = result["ended"]
    console.print(f"{agent}: holdback on {ended} ended" if ended else f"{agent}: no holdback runs")


versions_app = typer.Typer(
    help="An agent's versions: list them, show one, diff two.", no_args_is_help=False
)


@versions_app.callback(invoke_without_command=True)
def versions(
    context: typer.Context,
    agent: str | None = typer.Option(None, help="List this agent's versions."),
) -> None:
    """An agent's versions and where its aliases point (`versions --agent A`); `versions show
    A@v3` and `versions diff A@v2 A@v3` read one version or what changed between two."""
    if context.invoked_subcommand is not None:
        return
    if agent is None:
        raise typer.BadParameter("give --agent A, or `versions show A@v3` / `versions diff`")
    with _control() as control:
        found = control.versions(agent)
    aliases = found["aliases"]
    marks = {
        aliases.get("stable"): "stable",
        aliases.get("canary"): f"canary {aliases.get('canary_weight', 0):.0%}",
        aliases.get("shadow"): "shadow",
        aliases.get("holdback"): f"holdback {aliases.get('holdback_weight', 0):.0%}",
    }
    table = Table("version", "alias", "parent", "author", "reason")
    for version in found["versions"]:
        table.add_row(
            version["id"],
            marks.get(version["id"], ""),
            version["parent_id"] or "-",
            version["author"],
            version["reason"],
        )
    console.print(table)


def _agent_of(reference: str) -> str:
    agent, at, _ = reference.rpartition("@")
    if not at or not agent:
        raise typer.BadParameter(
            f"{reference!r}: name the agent and the version, e.g. support-bot@v3 or "
            "support-bot@stable"
        )
    return agent


@versions_app.command("show")
def show_version(
    reference: str = typer.Argument(..., help="agent@v3, or agent@stable (any alias)."),
    as_json: bool = typer.Option(
        False, "--json", help="Print the spec alone, as `evolve --candidate` reads it."
    ),
) -> None:
    """One version: its spec, part fingerprints, parent, author, reason and aliases."""
    with _control() as control:
        found = control.version(_agent_of(reference), reference)
    if as_json:  # plain text: a file to edit and hand back to `evolve --candidate`
        typer.echo(json.dumps(found["spec"], indent=2, ensure_ascii=False))
        return
    aliases = ", ".join(found["aliases"]) or "-"
    console.print(f"[bold]{found['id']}[/bold]  aliases: {aliases}", highlight=False)
    console.print(f"parent: {found['parent_id'] or '-'}", highlight=False)
    console.print(f"by {found['author']} at {found['created_at']}: {found['reason']}")
    console.print(f"content hash: {found['content_hash']}", highlight=False)
    for part, fingerprint in found["parts"].items():
        console.print(f"  {part}: {fingerprint}", highlight=False)
    console.print_json(data=found["spec"])


@versions_app.command("diff")
def diff_versions(
    before: str = typer.Argument(..., help="agent@v2 (or agent@stable)."),
    after: str = typer.Argument(..., help="agent@v3, or v3 for the same agent."),
) -> None:
    """What changed from one version to another: harness text, memory items, tool
    overrides, guardrails, model."""
    with _control() as control:
        found = control.version_diff(_agent_of(before), before, after)
    console.print(f"[bold]{found['from']} -> {found['to']}[/bold]", highlight=False)
    if not found["changed"]:
        console.print("no change: the two versions have the same content")
    for part in found["changed"]:
        console.print(f"[bold]{part}[/bold]")
        for line in _diff_lines(part, found["parts"][part]):
            console.print(line, highlight=False, markup=False)


def _diff_lines(part: str, change: dict[str, Any]) -> list[str]:
    """One part's change as the lines a person reads."""
    if part in ("harness", "tools"):
        named = [
            f"  {what} tools: {', '.join(change[what])}"
            for what in ("added", "removed", "changed")
            if change.get(what)
        ]
        return [*named, *change["diff"].rstrip("\n").splitlines()]
    if part == "memory":
        lines = [f"  + {_item_words(item)}" for item in change["added"]]
        lines += [f"  - {_item_words(item)}" for item in change["removed"]]
        lines += [
            f"  ~ {_item_words(item['from'])}  ->  {item['to']['content']}"
            for item in change["changed"]
        ]
        if "top_k" in change:
            lines.append(f"  top_k: {change['top_k']['from']} -> {change['top_k']['to']}")
        return lines
    if part == "skills":
        return _skill_lines(change)
    return _field_lines(change)


def _field_lines(change: dict[str, Any]) -> list[str]:
    return [
        f"  {field}: {json.dumps(values['from'])} -> {json.dumps(values['to'])}"
        for field, values in change.items()
    ]


def _skill_lines(change: dict[str, Any]) -> list[str]:
    """Skills added, removed and changed by name, then the set's settings."""
    lines = [f"  + {_skill_words(skill)}" for skill in change["added"]]
    lines += [f"  - {skill['name']}" for skill in change["removed"]]
    lines += [f"  ~ {_skill_words(item['after'])}" for item in change["changed"]]
    settings = {k: v for k, v in change.items() if k not in ("added", "removed", "changed")}
    return [*lines, *_field_lines(settings)]


def _skill_words(skill: dict[str, Any]) -> str:
    scope = ", ".join(skill.get("task_types") or []) or "any task"
    steps = skill.get("steps") or []
    return f"{skill['name']} [{scope}]: {len(steps)} steps ({skill.get('description', '')})"


def _item_words(item: dict[str, Any]) -> str:
    if item.get("content") is None:
        return f"{item['id']} (not in the registry)"
    scope = item.get("tenant") or "all tenants"
    return f"[{item['kind']}, {scope}] {item['content']}"


def schedule(
    agent: str = typer.Option(...),
    every: str = typer.Option("30m", help="Period, e.g. 30m, 6h."),
    tenant: list[str] = typer.Option([], help="Limit to these tenants (repeatable)."),
) -> None:
    """Evolve an agent periodically (a Temporal Schedule; a pass never overlaps the last)."""
    with _control() as control:
        result = control.schedule(agent, _duration_minutes(every), tenants=tenant or None)
    verb = "created" if result["created"] else "updated"
    console.print(f"schedule {result['id']} {verb}: every {every}")


def api(
    port: int | None = typer.Option(None, help="Port [env: EVOPLANE_API_PORT, default 8401]."),
) -> None:
    """Serve the control API (start, follow, approve and roll back evolutions)."""
    import uvicorn

    from activities.tracking import EvolutionTracker
    from evoplane.cli.gateway_cmd import KEEP_ALIVE_SECONDS
    from evoplane.control.app import create_control_app
    from evoplane.control.config import ControlConfig
    from evoplane.stack.launcher import admin_token_of
    from evoplane.worker import connect
    from registry import check_schema, create_db_engine

    settings = load_settings(api_port=port)
    engine = create_db_engine(settings.registry_url)
    check_schema(engine)
    config = ControlConfig(
        engine=engine,
        connect=lambda: connect(settings),
        admin_token=admin_token_of(settings),
        namespace=settings.temporal_namespace,
        temporal_ui_url=settings.temporal_ui_link,
        tracker=EvolutionTracker(settings.tracking_uri, temporal_ui_url=settings.temporal_ui_link),
    )
    uvicorn.run(
        create_control_app(config),
        host=settings.host,
        port=settings.api_port,
        log_level="warning",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
