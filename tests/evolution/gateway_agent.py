"""Trajectories recorded through the real gateway, for replay tests.

`live_gateway` serves the gateway (proxy.create_app under uvicorn) on loopback, in front of
a scripted upstream with the given `Behaviour` and a registry on SQLite; `Agent` runs a
conversation through it the way an agent framework does: it sends the whole history with its
tools, runs the tools the model calls and sends their results back, and reports the task's
outcome on /v1/events or the user's correction on /v1/feedback. What ends up in the registry
is what the gateway captured.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import Engine

from atdp import Event, VersionSpec
from proxy.config import GatewayConfig
from registry import (
    ALL_TENANTS,
    AgentVersion,
    create_db_engine,
    current_aliases,
    get_events,
    get_version,
    list_trajectories,
    transaction,
    upgrade,
)
from tests.support.gateway import GatewayServer, seed_gateway_world
from tests.support.upstream import Behaviour, ScriptedUpstream

AGENT = "support-bot"


@dataclass
class LiveGateway:
    """The gateway on loopback, its registry, the upstream behind it, and tenants' keys."""

    server: GatewayServer
    engine: Engine
    upstream: ScriptedUpstream
    keys: dict[str, str]

    def version(self, version_id: str | None = None) -> AgentVersion:
        """A version by id; the agent's stable version by default."""
        with transaction(self.engine) as session:
            return get_version(session, version_id or current_aliases(session, AGENT).stable)

    def events(self, session_id: str) -> list[Event]:
        """The events the gateway recorded for a session (after the writer drained)."""
        self.server.flush()
        with transaction(self.engine) as session:
            (trajectory,) = list_trajectories(session, ALL_TENANTS, session_id=session_id)
            return get_events(session, ALL_TENANTS, trajectory.id)


@contextmanager
def live_gateway(
    tmp_path: Path, behaviour: Behaviour, spec: Callable[[str], VersionSpec] | None = None
) -> Iterator[LiveGateway]:
    """Agent support-bot (tenants acme and globex) on a scripted upstream behind the gateway.

    Args:
        spec: the stable version's spec for the upstream's base URL (default: the seeded one).
    """
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    with ScriptedUpstream(behaviour=behaviour) as upstream:
        engine = create_db_engine(url)
        upgrade(engine)
        keys = seed_gateway_world(
            engine, upstream.base_url, spec(upstream.base_url) if spec else None
        )
        config = GatewayConfig(database_url=url, spool_dir=tmp_path / "spool", upstream_timeout=10)
        try:
            with GatewayServer(config) as server:
                yield LiveGateway(server, engine, upstream, keys)
        finally:
            engine.dispose()


# (tool name, parsed arguments) -> what the tool returns (JSON-serialisable).
ToolRunner = Callable[[str, dict[str, Any]], Any]


@dataclass
class Agent:
    """One conversation of an agent with the gateway: its history, tools and decoding."""

    live: LiveGateway
    tenant: str
    session: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    run_tool: ToolRunner | None = None
    decoding: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, Any]] = field(default_factory=list)

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(
            f"{self.live.server.base_url}{path}",
            json=payload,
            headers={
                "Authorization": f"Bearer {self.live.keys[self.tenant]}",
                "X-Session-Id": self.session,
            },
            timeout=30,
        )
        response.raise_for_status()
        return response.json()

    def say(self, text: str) -> str | None:
        """Send a user turn; run the tools the model calls until it answers in text."""
        self.messages.append({"role": "user", "content": text})
        while True:
            body: dict[str, Any] = {"model": AGENT, "messages": self.messages, **self.decoding}
            if self.tools:
                body["tools"] = self.tools
            message = self._post("/chat/completions", body)["choices"][0]["message"]
            self.messages.append({k: v for k, v in message.items() if v is not None})
            calls = message.get("tool_calls") or []
            if not calls:
                return message.get("content")
            assert self.run_tool is not None, "the model called a tool; give the agent run_tool"
            for call in calls:
                function = call["function"]
                returned = self.run_tool(function["name"], json.loads(function["arguments"]))
                self.messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": json.dumps(returned)}
                )

    def correct(self, correction: str) -> None:
        """A thumbs-down with the user's correction, as /v1/feedback records it."""
        self._post(
            "/feedback",
            {
                "session_id": self.session,
                "agent": AGENT,
                "thumbs": "down",
                "correction": correction,
            },
        )

    def report(self, success: bool) -> None:
        """The task's outcome, as the agent reports it on /v1/events."""
        self._post(
            "/events",
            {
                "session_id": self.session,
                "agent": AGENT,
                "kind": "task_outcome",
                "outcome": {"success": success},
                "side_effects": False,
            },
        )
