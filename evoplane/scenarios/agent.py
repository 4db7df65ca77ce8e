"""A team's agent on a plain SDK: only `base_url` points at Evoplane.

Ordinary tool-calling code: it sends the conversation and its tools, runs the tool the model
calls against the world's API, sends the result back and returns the model's answer. Teams
write agents differently, and each world's agent does (`AgentStyle`): on chat completions,
the Responses API or Anthropic's Messages API; some report the tools they ran and how a
task ended to `/v1/events`, some stream, some name the task type. What it shares with the
demo's agent (the SDK clients, the app's reports) is `evoplane.simulation.agent`'s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from evoplane.scenarios.world import Task, World
from evoplane.simulation.agent import GatewayAgent

__all__ = ["AgentStyle", "Conversation", "Reply", "ScenarioAgent"]

MAX_CALLS = 3  # model calls per user turn


@dataclass(frozen=True)
class AgentStyle:
    """How a team wrote its agent.

    Args:
        reports_tools: reports each tool run to /v1/events (else the gateway learns the
            result only from the next model call).
        reports_outcome: reports a tool task's outcome when the tool ran (task_outcome).
        streams: asks for streamed completions.
        task_types: names the task type in `metadata.task_type`.
        protocol: the API it speaks: chat completions, the Responses API (`openai`), or
            Anthropic's Messages API (`anthropic`).
    """

    reports_tools: bool = False
    reports_outcome: bool = False
    streams: bool = False
    task_types: bool = False
    protocol: Literal["chat", "responses", "messages"] = "chat"


@dataclass
class Reply:
    """The agent's answer to one user turn, with what the gateway said served it."""

    text: str
    event_id: str | None  # None for a streamed answer
    trajectory_id: str | None
    version: str
    ran: list[tuple[str, dict[str, Any], bool]] = field(default_factory=list)  # name, args, ok


@dataclass
class Conversation:
    task: Task
    session: str
    tenant: str
    messages: list[dict[str, Any]] = field(default_factory=list)


class ScenarioAgent(GatewayAgent):
    """One tenant's deployment of the team's agent, with the tenant's key."""

    def __init__(
        self, agent: str, tenant: str, key: str, gateway: str, world: World, style: AgentStyle
    ) -> None:
        super().__init__(agent, tenant, key, gateway, style.protocol)
        self.world, self.style = world, style

    def ask(self, conversation: Conversation, text: str) -> Reply:
        """The user says `text`; the agent answers, running the tools the model calls."""
        conversation.messages.append({"role": "user", "content": text})
        ran: list[tuple[str, dict[str, Any], bool]] = []
        for _ in range(MAX_CALLS):
            message, served = self._complete(conversation)
            calls = message.get("tool_calls") or []
            conversation.messages.append(message)
            if not calls:
                return Reply(text=message.get("content") or "", ran=ran, **served)
            for call in calls:
                ran.append(self._run(conversation, call, served["event_id"]))
        return Reply(text="", ran=ran, **served)

    def _complete(self, conversation: Conversation) -> tuple[dict[str, Any], dict[str, Any]]:
        metadata = {"task_type": conversation.task.kind} if self.style.task_types else None
        return self.complete(
            conversation.messages,
            self.world.tool_specs(),
            session=conversation.session,
            metadata=metadata,
            stream=self.style.streams,
        )

    def _run(
        self, conversation: Conversation, call: dict[str, Any], event_id: str | None
    ) -> tuple[str, dict[str, Any], bool]:
        name = call["function"]["name"]
        try:
            arguments = json.loads(call["function"]["arguments"] or "{}")
        except ValueError:
            arguments = {}
        tool = self.world.tools.get(name)
        if tool is None:
            result_text, ok = json.dumps({"error": f"no tool named {name}"}), False
        else:
            result = tool.backend(self.tenant, arguments if isinstance(arguments, dict) else {})
            result_text, ok = result.text, result.ok
        conversation.messages.append(
            {"role": "tool", "tool_call_id": call["id"], "content": result_text}
        )
        if self.style.reports_tools:
            self.report_tool_run(
                conversation.session,
                call,
                parent_event_id=event_id,
                ok=ok,
                result=_maybe_json(result_text),
                side_effects=False,
                error_class="api_error",
                error_message=result_text,
            )
        return name, arguments if isinstance(arguments, dict) else {}, ok


def _maybe_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
