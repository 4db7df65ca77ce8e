"""The people who use a scenario's agent: they ask, judge the answer, and say what was wrong.

A user judges an answer by the world's truth: the tenant's fact, the task's tool having run,
and whatever the user wants of every answer (`Instruction`). How they say it went wrong is
their tenant's habit (`FeedbackStyle`): a score or a thumb, a correcting message in the
conversation or the widget's correction box, rarely a category. Corrections come in many
wordings and languages, never in the control plane's vocabulary.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from evoplane.scenarios.agent import Conversation, Reply, ScenarioAgent
from evoplane.scenarios.world import Task, World
from evoplane.simulation.feedback import Rating, widget_report

__all__ = ["FeedbackStyle", "Problem", "User", "Visit", "problems"]

# What users say when a task simply did not get done.
_UNDONE = (
    "That didn't work.",
    "It still isn't done, the system refused it.",
    "Hmm, nothing happened on my side.",
    "Das hat leider nicht funktioniert.",
    "Ça n'a pas marché.",
)
# A feedback widget's categories, as teams name them (not Evoplane's words).
CATEGORIES = {
    "fact": "incorrect_information",
    "instruction": "did_not_follow_my_request",
    "tool": "action_failed",
}


@dataclass(frozen=True)
class FeedbackStyle:
    """How a tenant's users tell the agent how it did.

    Args:
        channel: "turn": they write their correction as the next message in the
            conversation; "box": in the feedback widget's correction box.
        rating: the explicit rating they give: a score in [0, 1], a thumb, or none.
        categories: they also pick one of the widget's categories when something is wrong.
        rate_good: the share of good answers they rate.
        explain: the share of bad answers they explain in words.
        deny_first: the share of wrong facts they first only deny (in the world's words),
            saying what is right in their next message.
    """

    channel: Literal["turn", "box"] = "turn"
    rating: Rating = "score"
    categories: bool = False
    rate_good: float = 0.5
    explain: float = 0.9
    deny_first: float = 0.0


@dataclass(frozen=True)
class Problem:
    """What was wrong with an answer, in the user's terms."""

    kind: Literal["fact", "instruction", "tool"]
    words: Sequence[str]  # ways the user might say it


@dataclass(frozen=True)
class Visit:
    """One session as the scenario's ledger keeps it."""

    kind: str
    tenant: str
    ok: bool  # first answer right
    version: str


def problems(world: World, tenant: str, task: Task, reply: Reply, wants: Sequence[str]) -> list:
    """Everything wrong with `reply` for a user of `tenant` who asked `task`."""
    found: list[Problem] = []
    if task.fact is not None:
        fact = world.facts[task.fact]
        truth = fact.values[tenant]
        if fact.found_in(reply.text) != fact.norm(truth):
            found.append(Problem("fact", [s.format(value=truth) for s in fact.statements]))
    if task.tool is not None and not any(n == task.tool and ok for n, _, ok in reply.ran):
        found.append(Problem("tool", task.complaints or _UNDONE))
    for name in wants:
        wanted = world.wanted[name]
        if not wanted.satisfied(reply.text, task):
            # A request may carry the user's own values ("... my parcel {parcel}").
            asked = [r.format_map(_Slots(task.slots)) for r in wanted.requests]
            found.append(Problem("instruction", asked))
    return found


class _Slots(dict):
    """A task's slots for `str.format_map`, leaving any other brace as it was."""

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


class User:
    """One person with one task; `visit` plays their session to its end."""

    def __init__(self, rng: random.Random, style: FeedbackStyle) -> None:
        self.rng, self.style = rng, style

    def visit(
        self, agent: ScenarioAgent, task: Task, session: str, wants: Sequence[str] = ()
    ) -> Visit:
        conversation = Conversation(task, session, agent.tenant)
        if task.procedure is not None:
            return self._walk(agent, conversation)
        reply = agent.ask(conversation, task.text)
        found = problems(agent.world, agent.tenant, task, reply, wants)
        if found:
            self._complain(agent, conversation, reply, found[0])
        elif self.rng.random() < self.style.rate_good:
            self._rate(agent, conversation, reply)
        if agent.style.reports_outcome and task.tool is not None:
            done = any(n == task.tool and ok for n, _, ok in reply.ran)
            agent.report_outcome(done, session=session)
        return Visit(task.kind, agent.tenant, not found, reply.version)

    def _walk(self, agent: ScenarioAgent, conversation: Conversation) -> Visit:
        """A multi-step task, one step a turn: the user says go on after a step done right,
        and, after a wrong one, rates it down and says which step was due. The visit is
        right first time when no step needed guidance."""
        task = conversation.task
        procedure = task.procedure
        assert procedure is not None
        done: list[str] = []
        text, guided, reply = task.text, False, None
        for _ in range(2 * len(procedure.steps)):
            due = next((step for step in procedure.steps if step not in done), None)
            if due is None:
                break
            reply = agent.ask(conversation, text)
            done += [name for name, _, ok in reply.ran if ok and name not in done]
            if due in done:
                text = self.rng.choice(procedure.go_on)
                continue
            guided = True
            report = widget_report(self.style.rating, good=False)
            agent.feedback(agent.target(conversation.session, reply.event_id), report)
            text = self.rng.choice(procedure.guidance)
        finished = all(step in done for step in procedure.steps)
        if agent.style.reports_outcome:
            agent.report_outcome(finished, session=conversation.session)
        version = reply.version if reply is not None else ""
        return Visit(task.kind, agent.tenant, finished and not guided, version)

    def _complain(
        self, agent: ScenarioAgent, conversation: Conversation, reply: Reply, problem: Problem
    ) -> None:
        words = self.rng.choice(list(problem.words)) if problem.words else None
        explained = words if self.rng.random() < self.style.explain else None
        report = widget_report(
            self.style.rating,
            good=False,
            category=CATEGORIES[problem.kind] if self.style.categories else None,
            correction=explained if self.style.channel == "box" else None,
        )
        agent.feedback(agent.target(conversation.session, reply.event_id), report)
        if explained and self.style.channel == "turn":
            world = agent.world
            if (
                problem.kind == "fact"
                and world.denials
                and self.rng.random() < self.style.deny_first
            ):
                agent.ask(conversation, self.rng.choice(world.denials))
            agent.ask(conversation, explained)

    def _rate(self, agent: ScenarioAgent, conversation: Conversation, reply: Reply) -> None:
        report = widget_report(self.style.rating, good=True)
        agent.feedback(agent.target(conversation.session, reply.event_id), report)
