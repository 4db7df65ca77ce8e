"""The customers: who asks what, and how they react to the answer.

A customer opens a ticket of some kind (a tool request in usual or new-wave words, or a
question), reads the agent's answer and reacts as people do: accepts a right one (thumbs
up), presses "wrong tool" and "try again" after a wrong tool (up to three tries), corrects
a missing fact (in the conversation, "No, ...", or with the correction box), tells of their
own experience instead, or reports an answer that breaks the shop's policy. Every ticket is
closed with its outcome. Each reaction is a signal the gateway records: next-turn
corrections, regenerates, failed tool calls, explicit feedback and task outcomes.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Literal

from evoplane.demo import world
from evoplane.demo.agent import Reply, SupportAgent
from evoplane.demo.tools import Ticket
from evoplane.demo.world import FACTS, HARD, NORMAL, Intent
from evoplane.simulation.feedback import widget_report

__all__ = ["MAX_TRIES", "Customer", "Outcome", "TicketKind"]

MAX_TRIES = 3
# How customers report a question the agent could not answer: they supply the fact
# (a missing fact), flag the answer as against the shop's policy, tell their own story in
# the correction box (which says the fact only to a person who knows the shop), or just
# say it was bad.
Report = Literal["correct", "policy", "tell", "thumbs"]


@dataclass(frozen=True)
class TicketKind:
    """One kind of ticket in a traffic mix.

    Args:
        label: how the demo's tables name it ("holiday question").
        intent: what the customer wants (also the trajectory's task type).
        tenants: the shops whose customers open it.
        words: "normal" or "hard" phrasings for tool intents.
        topic: the fact a question asks about.
        report: how customers react when a question goes unanswered.
    """

    label: str
    intent: Intent
    tenants: tuple[str, ...]
    words: Literal["normal", "hard"] = "normal"
    topic: str | None = None
    report: Report = "thumbs"

    def text(self, rng: random.Random) -> str:
        if self.intent is Intent.QUESTION:
            return rng.choice(FACTS[self.topic].questions)
        return rng.choice((HARD if self.words == "hard" else NORMAL)[self.intent])


@dataclass(frozen=True)
class Outcome:
    """One closed ticket, as the demo's ledger keeps it."""

    label: str
    tenant: str
    session: str
    trajectory_id: str
    version: str  # the version that served its first answer
    success: bool
    first_try: bool  # resolved by the first answer
    tries: int
    refused: int  # tool calls the platform refused
    at: float


class Customer:
    """Plays one ticket against an agent and sends the reactions through the agent's app."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def visit(self, agent: SupportAgent, kind: TicketKind, session: str, seed: int) -> Outcome:
        ticket = Ticket(agent.tenant, f"cust-{seed % 10_000}", str(10_000 + seed % 90_000))
        conversation = agent.open(ticket, session, kind.intent.value)
        first = agent.answer(conversation, kind.text(self.rng), seed=seed)
        if kind.intent is Intent.QUESTION:
            last, success, tries = self._question(agent, conversation, kind, first, seed)
        else:
            last, success, tries = self._request(agent, conversation, kind, first, seed)
        agent.close_ticket(last, success)
        return Outcome(
            label=kind.label,
            tenant=agent.tenant,
            session=session,
            trajectory_id=first.trajectory_id,
            version=first.version,
            success=success,
            first_try=success and tries == 1,
            tries=tries,
            refused=first.refused,
            at=time.time(),
        )

    def _request(self, agent, conversation, kind, reply: Reply, seed: int):
        wanted = world.TOOL_OF[kind.intent]
        for attempt in range(1, MAX_TRIES + 1):
            if reply.tool == wanted:
                _report(agent, reply, good=True)
                return reply, True, attempt
            _report(agent, reply, category="wrong_tool" if reply.tool is not None else None)
            if attempt < MAX_TRIES:
                reply = agent.regenerate(conversation, seed=seed + 7919 * attempt)
        return reply, False, MAX_TRIES

    def _question(self, agent, conversation, kind, reply: Reply, seed: int):
        fact = FACTS[kind.topic]
        if fact.line.casefold() in reply.text.casefold():
            _report(agent, reply, good=True)
            return reply, True, 1
        if kind.report == "correct":
            if self.rng.random() < 0.5:
                agent.answer(conversation, fact.correction, seed=seed + 1)
            else:
                _report(agent, reply, correction=fact.correction)
        elif kind.report == "tell":
            _report(agent, reply, correction=self.rng.choice(fact.told))
        elif kind.report == "policy":
            _report(agent, reply, category="policy", correction=fact.line)
        else:
            _report(agent, reply)
        return reply, False, 1


def _report(
    agent: SupportAgent,
    reply: Reply,
    *,
    good: bool = False,
    category: str | None = None,
    correction: str | None = None,
) -> None:
    """The shop's widget: a thumb, and a category ("wrong tool", "against our policy") or a
    correction with a thumb down."""
    report = widget_report("thumbs", good=good, category=category, correction=correction)
    agent.feedback({"event_id": reply.event_id}, report)
