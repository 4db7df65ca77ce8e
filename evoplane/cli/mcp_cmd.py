"""`evoplane mcp ...` registers the upstream MCP servers agents reach through the gateway
(`/mcp/{name}`); `evoplane mcp-bridge NAME` serves one over stdio for clients that only
spawn processes."""

from __future__ import annotations

import os
import shlex

import typer
from rich.console import Console
from rich.table import Table

from evoplane.cli.admin_cmd import _engine
from evoplane.settings import load_settings

app = typer.Typer(
    help="MCP servers: register an agent's upstream MCP servers, allow tenants to use them.",
    no_args_is_help=True,
)
console = Console(soft_wrap=True)


@app.command("add")
def mcp_add(
    agent: str,
    name: str,
    url: str | None = typer.Option(None, help="The server's streamable HTTP URL."),
    command: str | None = typer.Option(
        None, help="The command that starts the server over stdio (quoted, one string)."
    ),
    tenant: list[str] = typer.Option(
        ..., "--tenant", help="A tenant allowed to use the server (repeatable)."
    ),
) -> None:
    """Register an upstream MCP server of AGENT, served by the gateway at /mcp/NAME."""
    from registry import add_mcp_server, transaction

    if (url is None) == (command is None):
        raise typer.BadParameter("give exactly one of --url or --command")
    argv = shlex.split(command) if command else None
    with transaction(_engine()) as session:
        server = add_mcp_server(session, agent, name, url=url, command=argv, tenants=tenant)
    console.print(
        f"MCP server {server.name} of agent {agent} is served at /mcp/{server.name} "
        f"for {', '.join(server.tenants)}.",
        highlight=False,
    )


@app.command("allow")
def mcp_allow(name: str, tenant: str = typer.Option(..., help="The tenant to allow.")) -> None:
    """Allow another tenant to use an MCP server."""
    from registry import allow_mcp_tenant, transaction

    with transaction(_engine()) as session:
        allow_mcp_tenant(session, name, tenant)
    console.print(f"tenant {tenant} may use MCP server {name}.", highlight=False)


@app.command("list")
def mcp_list(agent: str | None = typer.Option(None, help="Only this agent's servers.")) -> None:
    """The registered MCP servers."""
    from registry import list_mcp_servers, transaction

    with transaction(_engine()) as session:
        servers = list_mcp_servers(session, agent)
    table = Table("name", "agent", "upstream", "tenants")
    for server in servers:
        upstream = server.url or shlex.join(server.command or [])
        table.add_row(server.name, server.agent, upstream, ", ".join(server.tenants))
    console.print(table)


@app.command("remove")
def mcp_remove(name: str) -> None:
    """Stop serving an MCP server."""
    from registry import remove_mcp_server, transaction

    with transaction(_engine()) as session:
        remove_mcp_server(session, name)
    console.print(f"MCP server {name} removed.", highlight=False)


def mcp_bridge(
    server: str,
    key: str | None = typer.Option(
        None, envvar="EVOPLANE_API_KEY", help="The tenant's API key [env: EVOPLANE_API_KEY]."
    ),
    session: str | None = typer.Option(
        None,
        envvar="EVOPLANE_SESSION_ID",
        help="The agent's session id, to tie the calls to its trajectory [env: "
        "EVOPLANE_SESSION_ID].",
    ),
    gateway: str | None = typer.Option(
        None, help="The gateway's /v1 URL [env: EVOPLANE_GATEWAY_URL, default the local one]."
    ),
) -> None:
    """Serve the gateway's MCP server SERVER over stdio (for clients that spawn a process)."""
    import anyio

    from proxy.mcp.bridge import serve_stdio

    if not key:
        raise typer.BadParameter(
            "no API key: pass --key or set EVOPLANE_API_KEY (create one with "
            "`evoplane key create --tenant NAME`)",
            param_hint="--key",
        )
    base = gateway or os.environ.get("EVOPLANE_GATEWAY_URL") or load_settings().gateway_api
    url = base.rstrip("/").removesuffix("/v1") + f"/mcp/{server}"
    anyio.run(serve_stdio, url, key, session)
