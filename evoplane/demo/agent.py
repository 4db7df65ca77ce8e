"""A shop's support agent, written with the plain `openai` SDK: only `base_url` is Evoplane's.

The agent is ordinary tool-calling code. It asks the model (with the shop's tools for order
tickets, without them for questions), runs the tool the model called (the platform validates
the arguments), asks again when the platform refuses the call, and answers the customer from
the tool's result. It reports the tool runs it executed and how each ticket ended to
`/v1/events`, and a refused call scores the model's call 0 on `/v1/feedback`; its widget's
thumbs, "wrong tool" and correction buttons send the customers' reports
(`evoplane.simulation.agent`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evoplane.demo import world
from evoplane.demo.tools import Platform, Ticket, ToolRun
from evoplane.simulation.agent import GatewayAgent

__all__ = ["Reply", "SupportAgent"]

MAX_TOKENS = 96
ATTEMPTS = 3  # model calls per customer turn while the platform refuses the arguments


@dataclass
class Reply:
    """One answer to the customer, with what the gateway said served it."""

    text: str
    tool: str | None  # the tool that ran successfully, if any
    event_id: str  # the llm_call behind the answer (feedback targets it)
    trajectory_id: str
    version: str
    calls: int  # model calls it took
    refused: int  # tool calls the platform refused on the way


@dataclass
class Conversation:
    """One ticket's conversation as the agent keeps it (the customer's view is `Reply`s)."""

    ticket: Ticket
    session: str
    task_type: str
    messages: list[dict[str, Any]] = field(default_factory=list)


class SupportAgent(GatewayAgent):
    """One shop's agent: an OpenAI client pointed at the gateway, and the shop's tools."""

    def __init__(
        self, agent: str, tenant: str, api_key: str, base_url: str, platform: Platform
    ) -> None:
        super().__init__(agent, tenant, api_key, base_url)
        self.platform = platform

    def open(self, ticket: Ticket, session: str, task_type: str) -> Conversation:
        system = {"role": "system", "content": world.agent_system(self.tenant)}
        return Conversation(ticket, session, task_type, [system])

    # --- answering ------------------------------------------------------------------------

    def answer(self, conversation: Conversation, text: str, *, seed: int) -> Reply:
        """The customer says `text`; the agent answers (calling tools as the model asks)."""
        conversation.messages.append({"role": "user", "content": text})
        return self._respond(conversation, seed)

    def regenerate(self, conversation: Conversation, *, seed: int) -> Reply:
        """The widget's "try again": the same request once more, with a new sample."""
        while conversation.messages[-1]["role"] != "user":
            conversation.messages.pop()
        return self._respond(conversation, seed)

    def _respond(self, conversation: Conversation, seed: int) -> Reply:
        """Ask the model; run the tool it calls; when the platform refuses the arguments,
        report the refusal and ask again (a fresh sample of the same request)."""
        # Questions go to the model without tools: only order tickets may change orders.
        tools = (
            None
            if conversation.task_type == world.Intent.QUESTION
            else self.platform.specs(world.tools_of(self.tenant))
        )
        refused = 0
        for attempt in range(ATTEMPTS):
            message, headers = self.complete(
                conversation.messages,
                tools,
                session=conversation.session,
                metadata={"task_type": conversation.task_type},
                temperature=1.0,
                seed=seed * 8 + attempt,
                max_tokens=MAX_TOKENS,
            )
            served = {**headers, "calls": attempt + 1}
            if not message.get("tool_calls"):
                text = (message.get("content") or "").strip()
                conversation.messages.append({"role": "assistant", "content": text})
                return Reply(text=text, tool=None, refused=refused, **served)
            call = message["tool_calls"][0]
            run = self.platform.run(
                call["function"]["name"], call["function"]["arguments"], conversation.ticket
            )
            self._report_run(conversation, call, run, served["event_id"])
            if run.ok:
                text = _reply_text(run)
                conversation.messages += [
                    {"role": "assistant", "content": text},
                ]
                return Reply(text=text, tool=run.name, refused=refused, **served)
            refused += 1
        text = "Sorry, I could not complete that request."
        conversation.messages.append({"role": "assistant", "content": text})
        return Reply(text=text, tool=None, refused=refused, **served)

    # --- what the app reports -----------------------------------------------------------

    def _report_run(
        self, conversation: Conversation, call: dict[str, Any], run: ToolRun, event_id: str
    ) -> None:
        """A tool call the agent executed, as its own record; a refused one also scores
        the model's call 0 (its arguments did not fit the tool)."""
        self.report_tool_run(
            conversation.session,
            call,
            parent_event_id=event_id,
            ok=run.ok,
            result=run.result,
            side_effects=run.side_effects,
            error_class=None if run.ok else run.result["error_type"],
            error_message=None if run.ok else run.result["error"],
        )
        if not run.ok:
            self.post("/feedback", {"event_id": event_id, "name": "tool_outcome", "score": 0.0})

    def close_ticket(self, reply: Reply, success: bool) -> None:
        self.report_outcome(success, trajectory_id=reply.trajectory_id)


def _reply_text(run: ToolRun) -> str:
    result = run.result
    if run.name == "lookup_order":
        return (
            f"Your order {result['order']} has {result['status']} and arrives {result['arrives']}."
        )
    if run.name == "refund":
        return (
            f"I refunded order {result['order']}; the money arrives within {result['days']} days."
        )
    if run.name == "cancel_order":
        return f"Order {result['order']} is cancelled."
    return f"I handed your ticket about order {result['order']} to our {result['queue']}."
