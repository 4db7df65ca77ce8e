"""One tenant's deployment of a team's agent: only `base_url` points at Evoplane.

The agent asks the model through its SDK (`clients`), with the tenant's key and the
conversation's session in `X-Session-Id`, and reads what served each answer from the
gateway's headers. Besides the completions it uses the two endpoints any app on Evoplane
may call: `/v1/events` for the tool runs it executed and how a task ended, and
`/v1/feedback` for what its users' widget sends. It never sees versions, harnesses or
memory: the gateway applies them. How it answers (which tools, how often it asks again)
is each world's own agent's.
"""

from __future__ import annotations

from typing import Any, Literal

import httpx

from evoplane.simulation.clients import Served, client_for

__all__ = ["GatewayAgent"]


class GatewayAgent:
    """An SDK client pointed at the gateway with one tenant's key, and the app's reports."""

    def __init__(
        self,
        agent: str,
        tenant: str,
        key: str,
        gateway: str,
        protocol: Literal["chat", "responses", "messages"] = "chat",
    ) -> None:
        self.agent, self.tenant = agent, tenant
        self.client = client_for(protocol, gateway, key)
        self.http = httpx.Client(
            base_url=gateway, headers={"Authorization": f"Bearer {key}"}, timeout=60
        )

    def close(self) -> None:
        self.client.close()
        self.http.close()

    def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        session: str,
        metadata: dict[str, str] | None = None,
        stream: bool | None = None,
        **sampling: Any,
    ) -> tuple[dict[str, Any], Served]:
        """The model's next turn as a chat message, and what the gateway said served it."""
        return self.client.complete(
            self.agent,
            messages,
            tools,
            session=session,
            metadata=metadata,
            stream=stream,
            **sampling,
        )

    # --- what the app reports -------------------------------------------------------------

    def report_tool_run(
        self,
        session: str,
        call: dict[str, Any],
        *,
        parent_event_id: str | None,
        ok: bool,
        result: Any,
        side_effects: bool,
        error_class: str | None = None,
        error_message: str | None = None,
    ) -> None:
        """A tool call the agent executed (`call` as the model wrote it), as its own record."""
        outcome: dict[str, Any] = {"success": ok, "tool_return": result}
        if not ok:
            outcome.update(error_class=error_class, error_message=error_message)
        self.post(
            "/events",
            {
                "session_id": session,
                "agent": self.agent,
                "kind": "tool_call",
                "parent_event_id": parent_event_id,
                "tool_call": {
                    "id": call["id"],
                    "name": call["function"]["name"],
                    "arguments": call["function"]["arguments"],
                },
                "outcome": outcome,
                "side_effects": side_effects,
            },
        )

    def report_outcome(
        self, success: bool, *, session: str | None = None, trajectory_id: str | None = None
    ) -> None:
        """How a task ended, on its trajectory where the app knows it, else its session."""
        where = (
            {"trajectory_id": trajectory_id}
            if trajectory_id is not None
            else {"session_id": session, "agent": self.agent}
        )
        self.post(
            "/events",
            {
                **where,
                "kind": "task_outcome",
                "outcome": {"success": success},
                "side_effects": False,
            },
        )

    def target(self, session: str, event_id: str | None) -> dict[str, Any]:
        """What feedback on an answer names: its llm call, else (streamed) the session."""
        if event_id is not None:
            return {"event_id": event_id}
        return {"session_id": session, "agent": self.agent}

    def feedback(self, target: dict[str, Any], report: dict[str, Any]) -> None:
        """Send a widget's `report` (see `feedback.widget_report`) on `target`, if it says
        anything."""
        if report:
            self.post("/feedback", {**target, **report})

    def post(self, path: str, body: dict[str, Any]) -> None:
        response = self.http.post(path, json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"POST {path} answered {response.status_code}: {response.text}")
